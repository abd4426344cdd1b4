import { CHANNEL_CHANGED } from '../channels';
import { queryRows, type Db } from '../db';
import type { Lease } from '../leases';
import { toJsonb, type ExecutionError } from '../rows';
import { FAIL, startsFrom, writes } from './moves';

/**
 * Marks an attempt failed: retried after `retryDelayMs` (on the database clock) when given, else the
 * execution is failed for good. Fenced like every worker write. A child execution's final failure
 * locks its parent first, as every statement that finishes a child does (see COMPLETE_CTES).
 */
export async function failExecution(db: Db, lease: Lease, error: ExecutionError, retryDelayMs: number | null, parentId: string | null = null): Promise<boolean> {
  const rows =
    retryDelayMs === null
      ? await queryRows<{ id: string }>(
          db,
          `WITH parent AS (
             SELECT id FROM stepwise.executions WHERE id = ?::uuid FOR NO KEY UPDATE
           )
           UPDATE stepwise.executions
              SET status = ${writes(FAIL, 'failed')}, error = ?::jsonb, completed_at = now(), due_at = NULL, lease_token = NULL, current_step = NULL
            WHERE id = ? AND lease_token = ? AND ${startsFrom(FAIL)} AND (SELECT count(*) FROM parent) >= 0
            RETURNING id, pg_notify('${CHANNEL_CHANGED}', id::text) IS NULL AS _n`,
          [parentId, toJsonb(error), lease.id, lease.token],
        )
      : await queryRows<{ id: string }>(
          db,
          `UPDATE stepwise.executions
              SET status = ${writes(FAIL, 'pending')}, error = ?::jsonb, due_at = now() + make_interval(secs => ?), lease_token = NULL, current_step = NULL
            WHERE id = ? AND lease_token = ? AND ${startsFrom(FAIL)}
            RETURNING id`,
          [toJsonb(error), retryDelayMs / 1000, lease.id, lease.token],
        );
  return rows.length > 0;
}
