import type { ExecutionStatus } from '../domain/status';
import { queryRows, type Db } from './db';
import type { ListPosition } from './executions';

/** Which executions a bulk action applies to. */
export interface BulkFilter {
  /** Only executions in one of these statuses (the action's own, when the caller named none). */
  statuses: readonly ExecutionStatus[];
  task?: string;
  /** Only executions pinned to this version (as stored: '' for the task without one). */
  taskVersion?: string;
  /** Created at or after this instant. */
  createdAfter?: Date;
  /** Created before this instant. */
  createdBefore?: Date;
  /** Every one of these tags. */
  tags?: readonly string[];
  /** Only executions after this position, in the order (created_at, id): where the last batch ended. */
  after?: ListPosition;
  /** Only executions created before this instant (microseconds, UTC): when the action's first batch began. */
  until?: string;
  limit: number;
}

/** A batch of a bulk action: its executions in order, where the last one stands, and the database's now. */
export interface BulkBatch {
  ids: string[];
  /** The last execution's position, to continue after; undefined for an empty batch. */
  last?: ListPosition;
  /** The transaction's start as ISO text to the microsecond: the `until` of the action's later batches. */
  now: string;
}

/** An instant as ISO text in UTC to the microsecond (see ListPosition). */
const micro = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/**
 * The next batch of executions a bulk action takes, oldest first, after `after`: a snapshot of the
 * filter's matches, each then changed by a conditional statement of its own (so none clobbers a
 * transition that came in between). Keyset paging, so a batch deep into a large action costs what
 * the first does. Not a hot path: one generic statement serves every combination of filters.
 */
export async function findBulkTargets(db: Db, f: BulkFilter): Promise<BulkBatch> {
  const rows = await queryRows<{ id: string | null; position: string | null; now: string }>(
    db,
    `WITH batch AS (
       SELECT id, created_at FROM stepwise.executions
        WHERE status = ANY(?::text[])
          AND (?::text IS NULL OR task = ?)
          AND (?::text IS NULL OR task_version = ?)
          AND (?::timestamptz IS NULL OR created_at >= ?)
          AND (?::timestamptz IS NULL OR created_at < ?)
          AND (?::timestamptz IS NULL OR created_at < ?)
          AND (?::text[] IS NULL OR tags @> ?::text[])
          AND (?::timestamptz IS NULL OR (created_at, id) > (?::timestamptz, ?::uuid))
        ORDER BY created_at, id
        LIMIT ?
     )
     SELECT batch.id, ${micro('batch.created_at')} AS position, ${micro('now()')} AS now
       FROM (SELECT 1) one LEFT JOIN batch ON true
      ORDER BY batch.created_at, batch.id`,
    [
      f.statuses,
      f.task ?? null,
      f.task ?? null,
      f.taskVersion ?? null,
      f.taskVersion ?? null,
      f.createdAfter ?? null,
      f.createdAfter ?? null,
      f.createdBefore ?? null,
      f.createdBefore ?? null,
      f.until ?? null,
      f.until ?? null,
      f.tags && f.tags.length > 0 ? f.tags : null,
      f.tags && f.tags.length > 0 ? f.tags : null,
      f.after?.createdAt ?? null,
      f.after?.createdAt ?? null,
      f.after?.id ?? null,
      f.limit,
    ],
  );
  const found = rows.filter((r): r is { id: string; position: string; now: string } => r.id !== null);
  const last = found[found.length - 1];
  return { ids: found.map((r) => r.id), last: last && { createdAt: last.position, id: last.id }, now: rows[0].now };
}
