import { queryRows, type Db } from './db';
import { TERMINAL_STATUS_LIST } from './rows';

/**
 * The statement of deleteFinishedExecutions (exported for the test that reads its plan). A finished
 * execution never changes again, so deleting it races with nothing but another sweep; SKIP LOCKED
 * lets concurrent sweeps (one per worker process) take disjoint rows instead of queueing on each
 * other. The rows are found through the (status, created_at, id) list index: an execution finishes
 * after it is created, so `created_at < cutoff` is implied by `completed_at < cutoff` and bounds the
 * range scan; the statuses are literals so the planner can prove the index's predicate.
 */
export const DELETE_FINISHED_SQL = `
  DELETE FROM stepwise.executions
   WHERE id IN (
     SELECT id FROM stepwise.executions
      WHERE status IN (${TERMINAL_STATUS_LIST}) AND created_at < ? AND completed_at < ?
      LIMIT ?
        FOR UPDATE SKIP LOCKED)
  RETURNING 1`;

/**
 * Deletes up to `limit` executions that finished (completed, failed or cancelled) before `cutoff`,
 * with their steps (ON DELETE CASCADE), in one statement. Returns how many it deleted; fewer than
 * `limit` means none was left that no concurrent sweep held.
 */
export async function deleteFinishedExecutions(db: Db, cutoff: Date, limit: number): Promise<number> {
  const rows = await queryRows(db, DELETE_FINISHED_SQL, [cutoff, cutoff, limit]);
  return rows.length;
}

/**
 * Deletes up to `limit` rate-limit start stamps older than a day, the longest period a rate limit may
 * have: every claim of a rate-limited task forgets its own old stamps, so these are only those of tasks
 * whose rate limit was removed, or whose workers stopped. Returns how many it deleted.
 */
export async function deleteOldRateStarts(db: Db, limit: number): Promise<number> {
  const rows = await queryRows(
    db,
    `DELETE FROM stepwise.rate_starts WHERE ctid = ANY(ARRAY(
       SELECT ctid FROM stepwise.rate_starts WHERE started_at < now() - interval '1 day' LIMIT ?))
     RETURNING 1`,
    [limit],
  );
  return rows.length;
}
