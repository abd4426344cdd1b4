// The operator kinds' part of a `make chaos` plan: how often an execution fails before an operator
// retries it, how the driver retries it (see operate.ts), and the groups a bulk retry takes by tag.
import type { ChaosData, ChaosKind, PlannedExecution } from './outcomes';

/** How the driver retries an execution of an operator kind. */
export type RetryMode = 'single' | 'concurrent' | 'race-cancel';

export interface BulkGroupPlan {
  tag: string;
  size: number;
  /** Whether the filter names `status: failed` (else the action's own statuses, failed and cancelled). */
  withStatus: boolean;
}

/** Members of a `bulk-retry` group: one POST …/bulk-retry takes them all. */
const BULK_GROUP_SIZE = 3;

/**
 * The data and driver's part of the operator kinds. `retry` fails `operatorRounds` times, each time
 * when its step's budget runs out (`attempts` plain errors, or one NonRetryableError); the driver
 * retries it after each, the last time in its `retryMode`. `bulk-retry` fails once, and its group's
 * bulk action retries it. `cancel-retry` (an event waiter) is cancelled while it waits, then retried.
 */
export function planOperated(kind: ChaosKind, data: ChaosData, random: () => number, int: (min: number, max: number) => number): Partial<PlannedExecution> {
  const mode = (): RetryMode => {
    const r = random();
    return r < 0.3 ? 'race-cancel' : r < 0.6 ? 'concurrent' : 'single';
  };
  if (kind === 'retry') {
    const nonRetryable = random() < 0.3;
    const perBudget = nonRetryable ? 1 : int(1, 2);
    const operatorRounds = random() < 0.3 ? 2 : 1;
    data.failTimes = perBudget * operatorRounds;
    data.attempts = nonRetryable ? 3 : perBudget;
    if (nonRetryable) data.nonRetryable = true;
    return { operatorRounds, retryMode: mode(), concurrentRetries: int(2, 4) };
  }
  if (kind === 'bulk-retry') {
    data.failTimes = data.attempts = int(1, 2);
    return { operatorRounds: 1 };
  }
  if (kind === 'cancel-retry') return { retryMode: random() < 0.4 ? 'concurrent' : 'single', concurrentRetries: int(2, 4) };
  return {};
}

/** Consecutive `bulk-retry` plans form groups, each tagged for the one bulk action that retries it. */
export function groupBulkRetries(plans: PlannedExecution[], runId: string): void {
  const bulk = plans.filter((p) => p.kind === 'bulk-retry');
  for (let start = 0; start < bulk.length; start += BULK_GROUP_SIZE) {
    const members = bulk.slice(start, start + BULK_GROUP_SIZE);
    const index = start / BULK_GROUP_SIZE;
    const group: BulkGroupPlan = { tag: `${runId}-bulk-${index}`, size: members.length, withStatus: index % 2 === 0 };
    for (const p of members) Object.assign(p, { bulkGroup: group, tags: [group.tag] });
  }
}
