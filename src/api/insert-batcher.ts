import { isDatabaseUnavailable } from '../store/db-errors';
import { GroupCommitter } from '../group-commit';
import type { Db } from '../store/db';
import { insertExecutions, type NewExecution, type ScheduleResult } from '../store/executions';

/**
 * One INSERT in flight at a time. With two, a burst of concurrent requests split into a convoy of
 * one-row and many-row statements; with one, everything that arrives during an INSERT shares the
 * next, so there are fewer commits, round trips and wake-ups of PostgreSQL per request
 * (docs/benchmarks.md has the measurement). An idle server still inserts each request at once.
 */
const MAX_IN_FLIGHT = 1;
/** Rows per INSERT; more requests than this wait for the next statement. */
const MAX_BATCH = 200;

/**
 * The API's inserts of new executions, through group commit (not to be confused with schedule(), the
 * SDK's insert in the caller's own transaction): requests that arrive while an INSERT is in flight are inserted
 * together by the next one, with one commit and one NOTIFY for all of them. Each request still gets its
 * answer only after its own row has committed; an idle server inserts each request at once.
 */
export function createInsertBatcher(db: Db): GroupCommitter<NewExecution, ScheduleResult> {
  return new GroupCommitter((items) => insertExecutions(db, items), isDatabaseUnavailable, { maxInFlight: MAX_IN_FLIGHT, maxBatch: MAX_BATCH });
}
