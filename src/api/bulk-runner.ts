import { parseInstant } from '../domain/instant';
import type { ExecutionStatus } from '../domain/status';
import { InvalidDataError } from '../errors';
import { findBulkTargets } from '../store/bulk';
import type { Db } from '../store/db';
import type { ListPosition } from '../store/executions';
import { bulkCursor, readBulkCursor } from './cursors';

/** Statements of a bulk action in flight at once: each its own transaction, a few side by side. */
const BULK_PARALLEL = 4;

/** A bulk action's request body, as the three bulk operations share it. */
export interface BulkBody {
  task?: string;
  /** As stored ('' for the task without a version). */
  taskVersion?: string;
  status?: ExecutionStatus;
  created_after?: string;
  created_before?: string;
  tag?: string[];
  limit?: number;
  cursor?: string;
}

/** How much one request of a bulk action may do (config's http.bulkBatchSize and http.bulkBudgetMs). */
export interface BulkBounds {
  batchSize: number;
  budgetMs: number;
}

/** What one request of a bulk action did, and where the next one continues (null: the action is done). */
export interface BulkAnswer {
  matched: number;
  changed: number;
  next_cursor: string | null;
}

/**
 * Runs a bulk action in batches: each batch is the next executions the filter matches, oldest first
 * (among the statuses the action applies to), each changed by a statement of its own (`change` says
 * whether it did: a row that moved on meanwhile is left alone), so a stop between batches leaves no
 * row half-written. Once the time budget is spent the request answers with what it did and a cursor
 * to continue after its last execution; `limit` counts the executions of every request of the action.
 */
export async function runBulk(db: Db, body: BulkBody, applies: readonly ExecutionStatus[], bounds: BulkBounds, change: (id: string) => Promise<boolean>): Promise<BulkAnswer> {
  const started = Date.now();
  const createdAfter = body.created_after === undefined ? undefined : parseInstant(body.created_after);
  const createdBefore = body.created_before === undefined ? undefined : parseInstant(body.created_before);
  const bad = [
    ...(body.created_after !== undefined && !createdAfter ? ['created_after'] : []),
    ...(body.created_before !== undefined && !createdBefore ? ['created_before'] : []),
  ];
  if (bad.length > 0) throw new InvalidDataError('request body is invalid', bad.map((f) => ({ path: `body/${f}`, message: 'must be an instant in the years 0001 to 9999 (UTC)' })));
  const progress = body.cursor === undefined ? undefined : readBulkCursor(body.cursor);
  // A status the action does not apply to matches nothing (cancelling a completed execution, say).
  const statuses = body.status === undefined ? applies : applies.filter((s) => s === body.status);
  const limit = body.limit ?? 1000;
  let after: ListPosition | undefined = progress?.after;
  let until = progress?.until;
  let taken = progress?.taken ?? 0;
  const answer: BulkAnswer = { matched: 0, changed: 0, next_cursor: null };
  while (statuses.length > 0 && taken < limit) {
    const want = Math.min(bounds.batchSize, limit - taken);
    const batch = await findBulkTargets(db, { statuses, task: body.task, taskVersion: body.taskVersion, createdAfter, createdBefore, tags: body.tag, after, until, limit: want });
    // The first batch fixes what the action takes: executions created after it began are not its.
    until ??= batch.now;
    answer.matched += batch.ids.length;
    answer.changed += await changeAll(batch.ids, change);
    taken += batch.ids.length;
    if (batch.ids.length < want || !batch.last) break;
    after = batch.last;
    if (taken < limit && Date.now() - started >= bounds.budgetMs) {
      answer.next_cursor = bulkCursor({ after, until, taken });
      break;
    }
  }
  return answer;
}

/** Changes every one of `ids`, a few at a time; how many `change` changed. */
async function changeAll(ids: readonly string[], change: (id: string) => Promise<boolean>): Promise<number> {
  let changed = 0;
  let next = 0;
  const lane = async () => {
    while (next < ids.length) {
      const id = ids[next++];
      if (await change(id)) changed += 1;
    }
  };
  await Promise.all(Array.from({ length: Math.min(BULK_PARALLEL, ids.length) }, lane));
  return changed;
}
