/** Errors a handler may throw or catch. Their `name` becomes the execution error's `type`. */
import type { Divergence, OperationRef } from '../domain/thrown';

const NON_RETRYABLE = Symbol.for('stepwise.NonRetryableError');
const EVENT_TIMEOUT = Symbol.for('stepwise.EventTimeoutError');
const CHILD_FAILED = Symbol.for('stepwise.ChildExecutionError');
const CHILD_TIMEOUT = Symbol.for('stepwise.ChildTimeoutError');
const STEP_TIMEOUT = Symbol.for('stepwise.StepTimeoutError');

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

/**
 * Marks an error of a ctx call made wrongly (a bad duration, name or date) as not retryable: the
 * same code makes the same call on every attempt, so the execution fails at once. It keeps its own
 * type (a RangeError stays one) and counts as a NonRetryableError.
 */
export function usageError<E extends Error>(err: E): E {
  Object.defineProperty(err, NON_RETRYABLE, { value: true });
  return err;
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
 * Rejects a ctx.waitForEvent that is still open when the handler waits for the same event again: the
 * old wait (a race's losing branch, a loop's earlier round) is closed, so a delivery reaches the new
 * one. A handler that awaits both at once gets this from the older.
 */
export class WaitSupersededError extends Error {
  override name = 'WaitSupersededError';
  constructor(
    readonly eventName: string,
    readonly closed: string,
    readonly by?: string,
  ) {
    super(`the wait ${JSON.stringify(closed)} for event ${JSON.stringify(eventName)} was closed by a later wait for the same event${by ? ` (${JSON.stringify(by)})` : ''}`);
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

/**
 * A replay met a different durable operation than the one its history recorded at that point: the
 * code changed under a running execution. `divergence` names both (the dashboard shows them); a
 * `recorded` of null is a history with no operation there (a patch the history predates).
 */
export class NonDeterminismError extends Error {
  override name = 'NonDeterminismError';
  readonly divergence: Divergence;
  constructor(seq: number, recorded: OperationRef | null, called: OperationRef, hint = '') {
    const what = (o: OperationRef) => `${o.kind} ${JSON.stringify(o.name)}`;
    const had = recorded ? `history has ${what(recorded)}` : 'history has no operation there';
    super(`replay diverged at operation #${seq + 1}: ${had}, the handler called ${what(called)}${hint ? `; ${hint}` : ''}`);
    this.divergence = { operation: seq + 1, recorded, called };
  }
}

/** A step attempt ran past its `timeout`; it is retried by the step's policy like any failure. */
export class StepTimeoutError extends Error {
  override name = 'StepTimeoutError';
  readonly [STEP_TIMEOUT] = true;
  constructor(
    readonly step: string,
    readonly timeoutMs: number,
  ) {
    super(`step ${JSON.stringify(step)} timed out after ${timeoutMs} ms`);
  }
  static override [Symbol.hasInstance](value: unknown): boolean {
    return brandedInstanceOf(this, StepTimeoutError, STEP_TIMEOUT, value);
  }
}

/**
 * Thrown by ctx.step when the step failed for good: its retries ran out, it threw a NonRetryableError,
 * or it returned a value JSON cannot hold. A replay throws it again from the history, without running
 * the step. Not retried at the task level either: the recorded failure would be read back as it is.
 */
export class StepFailedError extends NonRetryableError {
  override name = 'StepFailedError';
  constructor(
    readonly step: string,
    /** The step's last error as recorded: its type, message and whether it was retryable. */
    readonly error: { type: string; message: string; retryable: boolean },
    options?: { cause?: unknown },
  ) {
    super(`step ${JSON.stringify(step)} failed: ${error.message}`, options);
  }
}

/** The execution ran past its task's `timeout`; it fails without retries. */
export class ExecutionTimeoutError extends NonRetryableError {
  override name = 'ExecutionTimeoutError';
  constructor(
    readonly executionId: string,
    readonly timeoutMs: number,
  ) {
    super(`execution ${executionId} timed out: it ran past its task's timeout of ${timeoutMs} ms`);
  }
}

/** ctx.signal's reason when a client cancelled the execution (or an ancestor of it). */
export class ExecutionCancelledError extends Error {
  override name = 'ExecutionCancelledError';
  constructor(readonly executionId: string) {
    super(`execution ${executionId} was cancelled`);
  }
}

/** ctx.signal's reason when the worker shuts down and hands the execution back for another. */
export class ExecutionReleasedError extends Error {
  override name = 'ExecutionReleasedError';
  constructor(readonly executionId: string) {
    super(`execution ${executionId} was released: its worker is shutting down`);
  }
}

/** This worker no longer holds the execution: its lease was lost or taken over. */
export class LeaseLostError extends Error {
  override name = 'LeaseLostError';
  constructor(executionId: string) {
    super(`execution ${executionId} is no longer held by this worker: its lease was lost`);
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
 * True for errors that must never be retried at the task level: a retry would replay the same
 * recorded outcome (a child's failure, a wait's timeout) or the same divergence.
 */
export function isNonRetryable(err: unknown): boolean {
  return (
    err instanceof NonRetryableError ||
    err instanceof NonDeterminismError ||
    err instanceof ChildExecutionError ||
    err instanceof ChildTimeoutError ||
    err instanceof EventTimeoutError ||
    err instanceof WaitSupersededError
  );
}
