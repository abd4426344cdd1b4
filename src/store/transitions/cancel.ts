import { ACTIVE_STATUSES } from '../../domain/status';
import { CHANNEL_CANCEL, CHANNEL_CHANGED } from '../channels';
import { withReadCommitted, type Db } from '../db';
import { getExecution } from '../executions';
import { rowToExecution, type ExecutionRecord, type ExecutionRow } from '../rows';
import { CANCEL, startsFrom, statusIn, writes } from './moves';

export type CancelOutcome =
  | { kind: 'cancelled'; execution: ExecutionRecord }
  | { kind: 'already_cancelled'; execution: ExecutionRecord }
  | { kind: 'not_cancellable'; execution: ExecutionRecord }
  | { kind: 'not_found' };

/**
 * Cancels an execution and its unfinished descendants (the children its handler started, and theirs)
 * in one conditional UPDATE, so it cannot clobber a completion that commits first: whichever statement
 * takes the row lock first wins, and the other sees a terminal status. A worker running one of them
 * hears CHANNEL_CANCEL and aborts ctx.signal; its later writes are fenced out by the status check.
 * Stamped with clock_timestamp(), evaluated once the row is locked: a step that committed while the
 * cancel waited for the row is then stamped before it (now() would be when the cancel began waiting).
 * Their open sleeps, waits and retrying steps are marked cancelled in the same statement.
 *
 * Every statement that finishes a child locks its parent first (see COMPLETE_CTES); so does the
 * cancel, in a READ COMMITTED transaction of its own: the execution's own parent, if any (a finished
 * child's trigger completes its parent's step), then the execution, then its unfinished subtree
 * level by level. It waits for a finishing child's statement rather than deadlocking with it, and its
 * UPDATE then finds every row already locked. A child being started meanwhile waits for the parent's
 * lock and then finds the parent cancelled. Descendants are cancelled only when the execution itself
 * is: a finished execution's running children are left alone.
 */
export async function cancelExecution(db: Db, id: string): Promise<CancelOutcome> {
  const rows = await withReadCommitted(db, async (connection) => {
    const locked = await connection.query<{ id: string; depth: number }>(
      `WITH RECURSIVE tree(id, depth) AS (
         SELECT parent_id, -1 FROM stepwise.executions WHERE id = $1 AND parent_id IS NOT NULL
         UNION ALL
         SELECT id, 0 FROM stepwise.executions WHERE id = $1
         UNION ALL
         SELECT e.id, t.depth + 1 FROM stepwise.executions e JOIN tree t ON e.parent_id = t.id
          WHERE t.depth >= 0 AND ${statusIn(ACTIVE_STATUSES, 'e.status')}
       )
       SELECT e.id, tree.depth FROM stepwise.executions e JOIN tree USING (id) ORDER BY tree.depth, e.id FOR NO KEY UPDATE OF e`,
      [id],
    );
    if (!locked.rows.some((r) => r.depth === 0)) return [];
    // The subtree is found again, with a snapshot taken after the locks: a child that a start which
    // held the parent's lock inserted meanwhile is in it (the locking statement's list predates it).
    const result = await connection.query<ExecutionRow>(
      `WITH RECURSIVE tree(id) AS (
         SELECT id FROM stepwise.executions WHERE id = $1
         UNION ALL
         SELECT e.id FROM stepwise.executions e JOIN tree t ON e.parent_id = t.id WHERE ${statusIn(ACTIVE_STATUSES, 'e.status')}
       ),
       c AS (
         UPDATE stepwise.executions e
            SET status = ${writes(CANCEL, 'cancelled')}, completed_at = clock_timestamp(), due_at = NULL, lease_token = NULL,
                current_step = NULL, wait_event_name = NULL, wait_since = NULL, wait_timeout_at = NULL,
                error = CASE WHEN e.id = $1 THEN '{"type":"cancelled","message":"execution was cancelled","retryable":false}'::jsonb
                        ELSE jsonb_build_object('type', 'cancelled', 'message', 'its parent execution ' || e.parent_id || ' was cancelled', 'retryable', false) END
          WHERE e.id IN (SELECT id FROM tree) AND ${startsFrom(CANCEL, 'e.status')}
            AND EXISTS (SELECT 1 FROM stepwise.executions r WHERE r.id = $1 AND ${startsFrom(CANCEL, 'r.status')})
          RETURNING e.*
       ),
       open_steps AS (
         UPDATE stepwise.steps s SET outcome = 'cancelled', completed_at = c.completed_at
           FROM c WHERE s.execution_id = c.id AND NOT s.completed AND s.outcome IS NULL
         RETURNING 1
       )
       SELECT c.*, pg_notify('${CHANNEL_CANCEL}', c.id::text) IS NULL AS _a,
              pg_notify('${CHANNEL_CHANGED}', c.id::text) IS NULL AS _b, (SELECT count(*) FROM open_steps) AS _s FROM c`,
      [id],
    );
    return result.rows;
  });
  const own = rows.find((r) => r.id === id);
  if (own) return { kind: 'cancelled', execution: rowToExecution(own) };
  const current = await getExecution(db, id);
  if (!current) return { kind: 'not_found' };
  if (current.status === 'cancelled') return { kind: 'already_cancelled', execution: current };
  return { kind: 'not_cancellable', execution: current };
}
