import { CHANNEL_CHANGED, CHANNEL_WORK } from '../channels';
import { withReadCommitted, type Db } from '../db';
import { getExecution } from '../executions';
import { rowToExecution, type ExecutionRecord, type ExecutionRow } from '../rows';
import { RETRY, startsFrom, writes } from './moves';

export type RetryOutcome = { kind: 'retried'; execution: ExecutionRecord } | { kind: 'not_retryable'; execution: ExecutionRecord } | { kind: 'not_found' };

/**
 * The executions a retry of `$1` takes along: itself, and the children its cancel cascaded to (a
 * cancelled child that its parent's step, open when the parent was cancelled, still names), and
 * theirs. A child that failed or finished on its own keeps its outcome: the parent's replay reads it
 * from the history.
 */
const SUBTREE = `tree(id, depth) AS (
         SELECT id, 0 FROM stepwise.executions WHERE id = $1
         UNION ALL
         SELECT c.id, t.depth + 1 FROM stepwise.executions c JOIN tree t ON c.parent_id = t.id
          WHERE c.status = 'cancelled'
            AND EXISTS (SELECT 1 FROM stepwise.steps s WHERE s.execution_id = t.id AND s.kind = 'child' AND s.outcome = 'cancelled' AND s.result->>'execution_id' = c.id::text)
       )`;

/**
 * Puts a failed or cancelled execution back to `pending`, due now, to resume from where it stopped:
 * its completed steps are kept (a replay returns them), its failed step and the sleeps, waits and
 * retries its cancel cut short are open again, each step with a fresh retry budget (its failed
 * attempts stay in the history), and so is the execution's own budget and its task's timeout (counted
 * again from the next claim). Children its cancel cascaded
 * to are retried with it. The attempt that ended in a cancel is kept in the attempts.
 *
 * One conditional UPDATE, in a READ COMMITTED transaction that first locks the execution's parent,
 * the execution, then the children it takes along, as every statement that finishes a child does
 * (parent first): of a retry racing a cancel, a claim or another retry, exactly one wins.
 */
export async function retryExecution(db: Db, id: string): Promise<RetryOutcome> {
  const rows = await withReadCommitted(db, async (connection) => {
    await connection.query(
      `WITH RECURSIVE ${SUBTREE}, locked(id, depth) AS (
         SELECT parent_id, -1 FROM stepwise.executions WHERE id = $1 AND parent_id IS NOT NULL
         UNION ALL SELECT id, depth FROM tree
       )
       SELECT e.id FROM stepwise.executions e JOIN locked USING (id) ORDER BY locked.depth, e.id FOR NO KEY UPDATE OF e`,
      [id],
    );
    const result = await connection.query<ExecutionRow>(
      `WITH RECURSIVE ${SUBTREE},
       root AS (
         SELECT 1 FROM stepwise.executions WHERE id = $1 AND ${startsFrom(RETRY)}
       ),
       kept AS (
         INSERT INTO stepwise.attempts (execution_id, attempt, worker_id, started_at, ended_at, outcome, error)
         SELECT e.id, e.attempt, e.worker_id, e.attempt_started_at, coalesce(e.completed_at, now()), 'cancelled', e.error
           FROM stepwise.executions e
          WHERE e.id IN (SELECT id FROM tree) AND e.status = 'cancelled' AND e.attempt > 0 AND EXISTS (SELECT 1 FROM root)
         ON CONFLICT (execution_id, attempt) DO NOTHING
       ),
       reopened AS (
         UPDATE stepwise.steps s
            SET outcome = NULL, error = NULL, completed_at = NULL,
                attempt_base = CASE WHEN s.outcome = 'failed' THEN jsonb_array_length(coalesce(s.failures, '[]'::jsonb)) ELSE s.attempt_base END,
                wake_at = CASE WHEN s.kind = 'step' THEN NULL ELSE s.wake_at END
          WHERE s.execution_id IN (SELECT id FROM tree) AND s.outcome IS NOT NULL AND EXISTS (SELECT 1 FROM root)
         RETURNING 1
       ),
       retried AS (
         UPDATE stepwise.executions e
            SET status = ${writes(RETRY, 'pending')}, due_at = now(), completed_at = NULL, output = NULL, error = NULL,
                attempts_since_progress = 0, lease_token = NULL, current_step = NULL,
                timeout_from = NULL
          WHERE e.id IN (SELECT id FROM tree) AND ${startsFrom(RETRY, 'e.status')} AND EXISTS (SELECT 1 FROM root)
          RETURNING e.*
       )
       SELECT r.*, pg_notify('${CHANNEL_WORK}', r.task) IS NULL AS _w, pg_notify('${CHANNEL_CHANGED}', r.id::text) IS NULL AS _c,
              (SELECT count(*) FROM reopened) AS _r
         FROM retried r`,
      [id],
    );
    return result.rows;
  });
  const own = rows.find((r) => r.id === id);
  if (own) return { kind: 'retried', execution: rowToExecution(own) };
  const current = await getExecution(db, id);
  if (!current) return { kind: 'not_found' };
  return { kind: 'not_retryable', execution: current };
}
