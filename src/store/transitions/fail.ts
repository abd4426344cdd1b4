import { CHANNEL_CHANGED } from '../channels';
import { queryRows, type Db } from '../db';
import type { Lease } from '../leases';
import { toJsonb, type ExecutionError } from '../rows';
import { FAIL, startsFrom, writes } from './moves';

/**
 * Marks an attempt failed: retried after `retryDelayMs` (on the database clock) when given, else the
 * execution is failed for good. Fenced like every worker write. The attempt is kept (outcome
 * `retrying` or `failed`) with `attemptError`, which may carry a bounded stack for the operator. A
 * child execution's final failure locks its parent first, as every statement that finishes a child
 * does (see COMPLETE_CTES).
 */
export async function failExecution(
  db: Db,
  lease: Lease,
  error: ExecutionError,
  retryDelayMs: number | null,
  parentId: string | null = null,
  attemptError: ExecutionError & { stack?: string } = error,
): Promise<boolean> {
  return failWith(db, '?::uuid', parentId, lease, error, retryDelayMs, attemptError);
}

/**
 * failExecution for a caller that does not know the execution's parent (the worker protocol's: a
 * remote worker names only the execution and its lease): the parent is read from the row (a
 * parent_id never changes), then locked first all the same.
 */
export async function failExecutionFindingParent(db: Db, lease: Lease, error: ExecutionError, retryDelayMs: number | null, attemptError: ExecutionError & { stack?: string } = error): Promise<boolean> {
  return failWith(db, '(SELECT parent_id FROM stepwise.executions WHERE id = ?::uuid)', lease.id, lease, error, retryDelayMs, attemptError);
}

/** failExecution's statement; `parent` is the SQL of the parent's id, over the parameter `parentParam`. */
async function failWith(db: Db, parent: string, parentParam: string | null, lease: Lease, error: ExecutionError, retryDelayMs: number | null, attemptError: ExecutionError & { stack?: string }): Promise<boolean> {
  const final = retryDelayMs === null;
  const rows = await queryRows<{ id: string }>(
    db,
    `WITH parent AS (
       SELECT id FROM stepwise.executions WHERE ? AND id = ${parent} FOR NO KEY UPDATE
     ),
     failed AS (
       UPDATE stepwise.executions
          SET status = CASE WHEN ? THEN ${writes(FAIL, 'failed')} ELSE ${writes(FAIL, 'pending')} END, error = ?::jsonb,
              completed_at = CASE WHEN ? THEN now() END,
              due_at = CASE WHEN ? THEN NULL ELSE now() + make_interval(secs => ?) END,
              lease_token = NULL, current_step = NULL
        WHERE id = ? AND lease_token = ? AND ${startsFrom(FAIL)} AND (SELECT count(*) FROM parent) >= 0
        RETURNING id, attempt, worker_id, attempt_started_at
     ),
     kept AS (
       INSERT INTO stepwise.attempts (execution_id, attempt, worker_id, started_at, ended_at, outcome, error)
       SELECT id, attempt, worker_id, attempt_started_at, now(), ?, ?::jsonb FROM failed
       ON CONFLICT (execution_id, attempt) DO UPDATE SET ended_at = EXCLUDED.ended_at, outcome = EXCLUDED.outcome, error = EXCLUDED.error
     )
     SELECT id, pg_notify('${CHANNEL_CHANGED}', id::text) IS NULL AS _n FROM failed`,
    [final, parentParam, final, toJsonb(error), final, final, (retryDelayMs ?? 0) / 1000, lease.id, lease.token, final ? 'failed' : 'retrying', toJsonb(attemptError)],
  );
  return rows.length > 0;
}
