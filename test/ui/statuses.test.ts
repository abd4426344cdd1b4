import { ACTIVE_STATUSES, EXECUTION_STATUSES, TERMINAL_STATUSES as DOMAIN_TERMINAL, canTransition, isCancellable as domainIsCancellable } from '../../src/domain/status';
import { CANCELLABLE_STATUSES, RETRYABLE_STATUSES, STATUSES, TERMINAL_STATUSES, isCancellable, isRetryable, isTerminal } from '../../src/ui/statuses';

describe("the dashboard's statuses", () => {
  it('are the domain statuses, in the same order', () => {
    expect(STATUSES).toEqual(EXECUTION_STATUSES);
    expect(TERMINAL_STATUSES).toEqual(DOMAIN_TERMINAL);
    expect(CANCELLABLE_STATUSES).toEqual(ACTIVE_STATUSES);
  });

  it.each(EXECUTION_STATUSES.map((s) => [s]))('agree with the status machine on %s', (status) => {
    expect(isTerminal(status)).toBe(DOMAIN_TERMINAL.includes(status));
    expect(isCancellable(status)).toBe(domainIsCancellable(status));
    // An operator's retry is the move from a terminal status back to pending.
    expect(isRetryable(status)).toBe(DOMAIN_TERMINAL.includes(status) && canTransition(status, 'pending'));
  });

  it('retries failed and cancelled executions only', () => {
    expect(RETRYABLE_STATUSES).toEqual(['failed', 'cancelled']);
  });
});
