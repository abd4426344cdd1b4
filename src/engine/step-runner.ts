import { parseDuration, type Duration } from '../domain/duration';
import { toFaithfulJson } from '../domain/json';
import { computeRetryDelay, resolveRetryPolicy, type ResolvedRetryPolicy, type RetryPolicy } from '../domain/retry';
import { describeThrown } from '../domain/thrown';
import type { ReplayRecord } from '../store/steps';
import type { OperationContext } from './operation-context';
import { isNonRetryable, LeaseLostError, usageError, NonDeterminismError, NonRetryableError, StepFailedError, StoreUnavailableError } from './errors';
import { runStepAttempt, type StepFn } from './step-attempt';
import type { SpanTrace } from '../telemetry/tracing';

/** How long a step may run before the execution's current_step is written (fast steps never are). */
const CURRENT_STEP_DELAY_MS = 20;
/** Retries this soon wait in the worker; later ones free the slot and wait durably, as a sleep does. */
const INLINE_RETRY_MS = 5000;

/** Options of ctx.step. */
export interface StepOptions {
  /** Each attempt may run this long ('30s', 30000); past it the attempt fails with StepTimeoutError. */
  timeout?: Duration;
  /** How this step's failed attempts are retried; the task's `retry` by default. */
  retry?: Partial<RetryPolicy>;
}

/**
 * Runs a step's attempts: each bounded by its timeout, a failure recorded (kept for /steps) and
 * retried by the step's policy, in the worker when the backoff is short and durably when it is long;
 * the result is stored as its JSON form, which the first run returns too, so every run sees the same
 * value. Only this step re-runs on a retry: completed steps never do.
 */
export class StepRunner {
  constructor(private readonly context: () => OperationContext) {}

  private get ctx(): OperationContext {
    return this.context();
  }

  async run(seq: number, key: string, fn: StepFn<unknown>, options: StepOptions, recorded: ReplayRecord | undefined): Promise<unknown> {
    const task = this.ctx.retry;
    // The step's own fields over the task's policy.
    const policy = options.retry ? resolveRetryPolicy({ maxAttempts: task.maxAttempts, initialDelay: task.initialDelayMs, maxDelay: task.maxDelayMs, factor: task.factor, ...options.retry }) : task;
    let timeoutMs: number | undefined;
    try {
      timeoutMs = options.timeout === undefined ? undefined : parseDuration(options.timeout, `step ${JSON.stringify(key)} timeout`);
    } catch (err) {
      throw usageError(err as Error);
    }
    // A durable backoff recorded before that is not over yet: wait it out like a sleep.
    // Once the backoff is over (on a resume in this process), the next attempt runs from its record.
    const retry = (record: ReplayRecord) => this.run(seq, key, fn, options, record);
    if (recorded?.wakeAt && recorded.wakeAt.getTime() > this.ctx.databaseNow()) return this.ctx.suspension.block({ seq, name: key, kind: 'step', wakeAt: recorded.wakeAt }, retry);
    const budget = { first: (recorded?.failures.length ?? 0) + 1, base: recorded?.attemptBase ?? 0 };
    const span = this.ctx.trace?.startStep(key, 'step', { 'stepwise.step.seq': seq });
    const attempts = () => this.attempts(seq, key, fn, policy, timeoutMs, budget, recorded !== undefined, span);
    let outcome: { value: unknown } | { retryAt: Date };
    try {
      // The step's function runs under its span: spans it makes itself nest under it.
      outcome = await this.ctx.suspension.track(span ? () => span.run(attempts) : attempts);
    } catch (err) {
      span?.end(err instanceof StepFailedError ? 'failed' : 'stopped');
      throw err;
    }
    if ('retryAt' in outcome) {
      span?.setAttributes({ 'stepwise.wake_at': outcome.retryAt.toISOString() });
      span?.end('retry_scheduled');
      return this.ctx.suspension.block({ seq, name: key, kind: 'step', wakeAt: outcome.retryAt }, retry);
    }
    span?.end('completed');
    return outcome.value;
  }

  private async attempts(
    seq: number,
    key: string,
    fn: StepFn<unknown>,
    policy: ResolvedRetryPolicy,
    timeoutMs: number | undefined,
    budget: { first: number; base: number },
    hasRow: boolean,
    span: SpanTrace | undefined,
  ): Promise<{ value: unknown } | { retryAt: Date }> {
    const { lease } = this.ctx;
    for (let attempt = budget.first; ; attempt++) {
      // Past the lease's end another worker may hold the execution: running the step now could repeat
      // one that worker has already recorded.
      if (Date.now() >= this.ctx.writeDeadline()) throw new LeaseLostError(lease.id);
      span?.setAttributes({ 'stepwise.step.attempt': attempt });
      const started = Date.now();
      let value: unknown;
      try {
        value = await this.runOnce(key, fn, attempt, timeoutMs);
      } catch (err) {
        if (this.ctx.abort.aborted) throw this.ctx.abort.reason;
        if (err instanceof LeaseLostError || err instanceof StoreUnavailableError || err instanceof NonDeterminismError) throw err;
        // Attempts before the base were spent before an operator's retry: they count no more.
        const retryable = !isNonRetryable(err) && attempt - budget.base < policy.maxAttempts;
        const error = describeThrown(err, retryable);
        const delay = retryable ? computeRetryDelay(policy, attempt - budget.base) : null;
        const retryAt = delay !== null && delay > INLINE_RETRY_MS ? new Date(this.ctx.databaseNow() + delay) : undefined;
        const failure = { seq, name: key, attempt, error, startedAt: new Date(started), final: !retryable, retryAt };
        if (retryable) span?.event('stepwise.step_attempt_failed', { 'stepwise.step.attempt': attempt, 'exception.type': error.type, 'exception.message': error.message });
        else span?.fail(error);
        if (!(await this.ctx.write(() => this.ctx.backend.recordStepFailure(lease, failure)))) throw new LeaseLostError(lease.id);
        hasRow = true;
        if (!retryable) throw new StepFailedError(key, error, { cause: err });
        this.ctx.log().warn({ step: key, stepAttempt: attempt, errorType: error.type, retryInMs: delay }, 'step attempt failed; retrying');
        if (retryAt) return { retryAt };
        await this.pause(delay as number);
        continue;
      }
      // A retry after a connection cut may find the row its first try committed (see recordStepResults).
      let resent = hasRow;
      const landed = await this.ctx.write(() => {
        // Fields named, not spread from the lease: a spread costs V8's slow path on every step.
        const step = { id: lease.id, token: lease.token, seq, name: key, result: value, startedAt: new Date(started), resent };
        resent = true;
        return this.ctx.recordStep(step);
      });
      if (!landed) throw new LeaseLostError(lease.id);
      this.ctx.progressed?.();
      this.ctx.onStep?.(key, 'step', Date.now() - started);
      return { value };
    }
  }

  /** One attempt: runs the function, names the step on the execution when it runs long, and returns the result's JSON form. */
  private async runOnce(key: string, fn: StepFn<unknown>, attempt: number, timeoutMs: number | undefined): Promise<unknown> {
    let marking: Promise<unknown> | undefined;
    const timer = setTimeout(() => {
      marking = this.ctx.backend.setCurrentStep(this.ctx.lease, key).then((named) => named && this.ctx.progressed?.(), () => undefined);
    }, CURRENT_STEP_DELAY_MS);
    let result: unknown;
    try {
      result = await runStepAttempt(key, fn, attempt, timeoutMs, this.ctx.abort);
    } finally {
      clearTimeout(timer);
      // The current_step write must not land after the record that clears it.
      if (marking) await marking;
    }
    try {
      return toFaithfulJson(result, `the result of step ${JSON.stringify(key)}`, { maxBytes: this.ctx.limits.valueBytes });
    } catch (err) {
      // Running the step again would produce the same value: fail it without retries.
      throw new NonRetryableError((err as Error).message);
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const abort = this.ctx.abort;
      if (abort.aborted) return reject(abort.reason);
      const timer = setTimeout(resolve, ms);
      abort.signal.addEventListener('abort', () => (clearTimeout(timer), reject(abort.reason)), { once: true });
    });
  }
}
