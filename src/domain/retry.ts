import { parseDuration, type Duration } from './duration';

/** How a task's failed attempts are retried. */
export interface RetryPolicy {
  /** Attempts in all, the first included; 1 means never retry. */
  maxAttempts: number;
  initialDelay: Duration;
  maxDelay: Duration;
  /** Growth of the delay per attempt. */
  factor?: number;
}

export const DEFAULT_RETRY_POLICY: Readonly<Required<RetryPolicy>> = Object.freeze({
  maxAttempts: 3,
  initialDelay: '1s',
  maxDelay: '5m',
  factor: 2,
});

/** A policy with every field filled in and its durations parsed. */
export interface ResolvedRetryPolicy {
  maxAttempts: number;
  initialDelayMs: number;
  maxDelayMs: number;
  factor: number;
}

export function resolveRetryPolicy(policy: Partial<RetryPolicy> = {}): ResolvedRetryPolicy {
  const p = { ...DEFAULT_RETRY_POLICY, ...policy };
  if (!Number.isInteger(p.maxAttempts) || p.maxAttempts < 1) {
    throw new RangeError(`retry.maxAttempts must be an integer >= 1, got ${p.maxAttempts}`);
  }
  if (!(p.factor >= 1)) throw new RangeError(`retry.factor must be >= 1, got ${p.factor}`);
  const initialDelayMs = parseDuration(p.initialDelay, 'retry.initialDelay');
  const maxDelayMs = parseDuration(p.maxDelay, 'retry.maxDelay');
  return { maxAttempts: p.maxAttempts, initialDelayMs, maxDelayMs: Math.max(maxDelayMs, initialDelayMs), factor: p.factor };
}

/**
 * Delay before the attempt after `attempt` (1-based), exponential and capped, with "equal jitter":
 * half the delay is fixed and half is random, so retries spread out but never come back at once.
 */
export function computeRetryDelay(policy: ResolvedRetryPolicy, attempt: number, random: () => number = Math.random): number {
  const exp = policy.initialDelayMs * Math.pow(policy.factor, Math.max(0, attempt - 1));
  const capped = Math.min(policy.maxDelayMs, exp);
  return Math.round(capped / 2 + random() * (capped / 2));
}

/** True when another attempt is allowed after `attempt` attempts have failed. */
export function hasAttemptsLeft(policy: ResolvedRetryPolicy, attempt: number): boolean {
  return attempt < policy.maxAttempts;
}
