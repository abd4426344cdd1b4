/** Pure: what "cancel all matching" and "retry all matching" take from the list's filter, and how they ask. */
import type { BulkFilter, ExecutionStatus } from '../client';
import { isFiltered, type ListFilter } from './routes';
import { CANCELLABLE_STATUSES, RETRYABLE_STATUSES } from './statuses';

export type BulkAction = 'cancel' | 'retry';

/** The statuses each action applies to, as the server has it: others in a filter match nothing. */
export const BULK_STATUSES: Readonly<Record<BulkAction, readonly ExecutionStatus[]>> = Object.freeze({
  cancel: CANCELLABLE_STATUSES,
  retry: RETRYABLE_STATUSES,
});

/** The server's ceiling on one bulk action's `limit`. */
export const BULK_MAX = 10_000;

const VERB: Record<BulkAction, string> = { cancel: 'Cancel', retry: 'Retry' };
const PAST: Record<BulkAction, string> = { cancel: 'cancelled', retry: 'retried' };

/** `a`, `a or b`, `a, b or c`. */
function either(words: readonly string[]): string {
  return words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`;
}

/**
 * Why the action cannot take the list's filter as it stands, or null when it can. The bulk endpoints
 * filter by task, status, tags and creation time only: acting on a list narrowed by anything else
 * would reach executions the operator does not see.
 */
export function bulkBlocker(action: BulkAction, f: ListFilter): string | null {
  if (f.parent) return 'Bulk actions cannot be limited to the children of one execution.';
  if (f.idempotencyKey) return 'Bulk actions cannot be limited to an idempotency key.';
  if (f.status && !BULK_STATUSES[action].includes(f.status)) return `Only ${either(BULK_STATUSES[action])} executions can be ${PAST[action]}.`;
  return null;
}

/** The statuses whose executions the action would take under `f`: the filter's own, or all the action's. */
export function bulkStatuses(action: BulkAction, f: ListFilter): ExecutionStatus[] {
  if (f.status) return BULK_STATUSES[action].includes(f.status) ? [f.status] : [];
  return [...BULK_STATUSES[action]];
}

/**
 * The body for the bulk endpoint: the list's filter, and `count` as the limit, so the action never
 * takes more than the operator confirmed (oldest first: executions scheduled since are left alone).
 */
export function bulkBody(f: ListFilter, count: number): BulkFilter {
  const body: BulkFilter = { limit: Math.min(BULK_MAX, Math.max(1, count)) };
  if (f.task) body.task = f.task;
  if (f.status) body.status = f.status;
  if (f.tags) body.tag = f.tags;
  if (f.createdAfter) body.created_after = f.createdAfter;
  if (f.createdBefore) body.created_before = f.createdBefore;
  return body;
}

/**
 * The question before the action, naming how many it takes and in which statuses:
 * `Retry 3 failed or cancelled executions matching this filter?`.
 */
export function bulkQuestion(action: BulkAction, f: ListFilter, count: number): string {
  const statuses = either(bulkStatuses(action, f));
  const noun = count === 1 ? 'execution' : 'executions';
  // With no filter the action reaches every execution it applies to: say so rather than "matching".
  const scope = isFiltered(f) ? ' matching this filter' : ', with no filter set';
  if (count > BULK_MAX) return `${VERB[action]} the oldest ${BULK_MAX} of the ${count} ${statuses} executions${scope}?`;
  return `${VERB[action]} ${count} ${statuses} ${noun}${scope}?`;
}

/** What the operator reads when nothing matches: no question is asked. */
export function bulkNothing(action: BulkAction, f: ListFilter): string {
  return `No ${either(bulkStatuses(action, f))} execution matches this filter: nothing to ${action}.`;
}

/** The outcome in words: `Retried 3 of 3 matching executions.`, and why some were left. */
export function bulkOutcome(action: BulkAction, result: { matched: number; changed: number }): string {
  const verb = PAST[action][0].toUpperCase() + PAST[action].slice(1);
  const text = `${verb} ${result.changed} of ${result.matched} matching ${result.matched === 1 ? 'execution' : 'executions'}.`;
  return result.changed < result.matched ? `${text} The others had moved on meanwhile.` : text;
}
