import type { ExecutionStatus } from '../domain/status';
import { queryRows, type Db } from './db';

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
  limit: number;
}

/**
 * The ids a bulk action takes, oldest first: a snapshot of the filter's matches, each then changed
 * by a conditional statement of its own (so none clobbers a transition that came in between). Not a
 * hot path: one generic statement serves every combination of filters.
 */
export async function findBulkTargets(db: Db, f: BulkFilter): Promise<string[]> {
  const rows = await queryRows<{ id: string }>(
    db,
    `SELECT id FROM stepwise.executions
      WHERE status = ANY(?::text[])
        AND (?::text IS NULL OR task = ?)
        AND (?::text IS NULL OR task_version = ?)
        AND (?::timestamptz IS NULL OR created_at >= ?)
        AND (?::timestamptz IS NULL OR created_at < ?)
        AND (?::text[] IS NULL OR tags @> ?::text[])
      ORDER BY created_at, id
      LIMIT ?`,
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
      f.tags && f.tags.length > 0 ? f.tags : null,
      f.tags && f.tags.length > 0 ? f.tags : null,
      f.limit,
    ],
  );
  return rows.map((r) => r.id);
}
