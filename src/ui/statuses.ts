/**
 * Pure: the status machine as the dashboard reads it. The dashboard is bundled from the package's
 * src/ui, which ships without src/domain/status.ts: test/ui/statuses.test.ts holds these to it.
 */
import type { ExecutionStatus } from '../client';

export const STATUSES: readonly ExecutionStatus[] = Object.freeze(['pending', 'running', 'waiting', 'completed', 'failed', 'cancelled']);

/** Statuses an execution never leaves on its own: its page stops refreshing. */
export const TERMINAL_STATUSES: readonly ExecutionStatus[] = Object.freeze(['completed', 'failed', 'cancelled']);

/** What a cancel applies to. */
export const CANCELLABLE_STATUSES: readonly ExecutionStatus[] = Object.freeze(['pending', 'running', 'waiting']);

/** What an operator's retry applies to. */
export const RETRYABLE_STATUSES: readonly ExecutionStatus[] = Object.freeze(['failed', 'cancelled']);

export function isTerminal(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

export function isCancellable(status: string): boolean {
  return (CANCELLABLE_STATUSES as readonly string[]).includes(status);
}

export function isRetryable(status: string): boolean {
  return (RETRYABLE_STATUSES as readonly string[]).includes(status);
}
