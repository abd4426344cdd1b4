/** Errors a handler may throw or catch. Their `name` becomes the execution error's `type`. */

const NON_RETRYABLE = Symbol.for('stepwise.NonRetryableError');
const EVENT_TIMEOUT = Symbol.for('stepwise.EventTimeoutError');
const CHILD_FAILED = Symbol.for('stepwise.ChildExecutionError');
const CHILD_TIMEOUT = Symbol.for('stepwise.ChildTimeoutError');

/**
 * `instanceof` by brand, so a task module that loaded another copy of the package (its own
 * node_modules) still recognises the engine's errors. Subclasses keep ordinary `instanceof`.
 */
function brandedInstanceOf(ctor: unknown, base: unknown, brand: symbol, value: unknown): boolean {
  if (ctor !== base) return Function.prototype[Symbol.hasInstance].call(ctor, value);
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[brand] === true;
}

/** Fails the execution at once, without retries. */
export class NonRetryableError extends Error {
  override name = 'NonRetryableError';
  readonly [NON_RETRYABLE] = true;
  static override [Symbol.hasInstance](value: unknown): boolean {
    return brandedInstanceOf(this, NonRetryableError, NON_RETRYABLE, value);
  }
}

/** Thrown by ctx.waitForEvent when its timeout passes first; a handler may catch it. */
export class EventTimeoutError extends Error {
  override name = 'EventTimeoutError';
  readonly [EVENT_TIMEOUT] = true;
  constructor(readonly eventName: string) {
    super(`timed out waiting for event ${JSON.stringify(eventName)}`);
  }
  static override [Symbol.hasInstance](value: unknown): boolean {
    return brandedInstanceOf(this, EventTimeoutError, EVENT_TIMEOUT, value);
  }
}

/**
 * Thrown by ctx.invoke when the child execution failed or was cancelled; a handler may catch it.
 * `error` is the child's own (its type, message and whether it was retryable).
 */
export class ChildExecutionError extends Error {
  override name = 'ChildExecutionError';
  readonly [CHILD_FAILED] = true;
  constructor(
    readonly executionId: string,
    readonly status: 'failed' | 'cancelled',
    readonly error: { type: string; message: string; retryable: boolean } | null,
  ) {
    super(`child execution ${executionId} ${status}${error ? `: ${error.message}` : ''}`);
  }
  static override [Symbol.hasInstance](value: unknown): boolean {
    return brandedInstanceOf(this, ChildExecutionError, CHILD_FAILED, value);
  }
}

/** Thrown by ctx.invoke when its timeout passes before the child finishes (the child goes on). */
export class ChildTimeoutError extends Error {
  override name = 'ChildTimeoutError';
  readonly [CHILD_TIMEOUT] = true;
  constructor(readonly executionId: string) {
    super(`timed out waiting for child execution ${executionId}`);
  }
  static override [Symbol.hasInstance](value: unknown): boolean {
    return brandedInstanceOf(this, ChildTimeoutError, CHILD_TIMEOUT, value);
  }
}

/** A replay met a different durable operation than the one recorded at that position. */
export class NonDeterminismError extends Error {
  override name = 'NonDeterminismError';
  constructor(seq: number, expected: string, found: string) {
    super(`replay diverged at operation #${seq + 1}: history has ${expected}, the handler called ${found}`);
  }
}

/** This worker no longer holds the execution (cancelled, or its lease was taken over). */
export class LeaseLostError extends Error {
  override name = 'LeaseLostError';
  constructor(executionId: string) {
    super(`execution ${executionId} is no longer held by this worker`);
  }
}

/**
 * The engine's own database write or read could not reach PostgreSQL before the lease ran out. It says
 * nothing about the handler: the attempt is abandoned (not failed) and the execution is taken over
 * once its lease expires, so an outage never uses up retries or fails an execution.
 */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
  constructor(override readonly cause: unknown) {
    super(`the database is unavailable: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/**
 * Internal: unwinds a handler that paused durably (sleep, wait). The pause is already recorded and
 * the lease released when it is thrown. Handlers must not swallow it; a catch-all should rethrow it.
 */
export class SuspendSignal extends Error {
  override name = 'SuspendSignal';
  constructor(readonly until: Date | null) {
    super('execution suspended');
  }
}

/** True for errors that must never be retried. */
export function isNonRetryable(err: unknown): boolean {
  return err instanceof NonRetryableError || err instanceof NonDeterminismError;
}
