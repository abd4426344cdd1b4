import { isDatabaseUnavailable } from '../errors';
import { GroupCommitter } from '../group-commit';
import type { Db } from '../store/db';
import { insertExecutions, type NewExecution, type ScheduleResult } from '../store/executions';

/**
 * Schedules through group commit: requests that arrive while an INSERT is in flight are inserted
 * together by the next one, with one commit and one NOTIFY for all of them. Each request still gets its
 * answer only after its own row has committed; an idle server inserts each request at once.
 */
export function createScheduler(db: Db): GroupCommitter<NewExecution, ScheduleResult> {
  return new GroupCommitter((items) => insertExecutions(db, items), isDatabaseUnavailable, 2, 200);
}
