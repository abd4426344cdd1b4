import type { TSchema } from '@sinclair/typebox';
import { parseDuration, type Duration } from '../domain/duration';
import { toStorableJson, toStoredValue } from '../domain/json';
import type { Logger } from '../logger';
import type { Db } from '../store/db';
import { setCurrentStep, type Lease } from '../store/leases';
import type { StepKind, StepRecord } from '../store/rows';
import { startChild, type ChildStepResult } from '../store/children';
import { suspendForChild } from '../store/transitions/suspend';
import { completeTimedStep, type StepResult } from '../store/steps';
import { suspendExecution } from '../store/transitions/suspend';
import { newExecutionId } from '../domain/ids';
import { toInstant } from '../domain/instant';
import type { ChildTaskChecker } from './children';
import type { LazyAbortController } from './abort';
import { retryWhileUnavailable } from './db-retry';
import { ChildExecutionError, ChildTimeoutError, EventTimeoutError, LeaseLostError, NonDeterminismError, NonRetryableError, SuspendSignal } from './errors';
import type { ChildOptions, EventName, EventPayload, InvokeOptions, TaskContext, TaskDefinition } from './task';

/** How long a step may run before the execution's current_step is written (fast steps never are). */
const CURRENT_STEP_DELAY_MS = 20;

export interface DurableContextOptions {
  db: Db;
  lease: Lease;
  attempt: number;
  /** ctx.scheduledFor: the execution's start_at, else when it was scheduled. */
  scheduledFor: Date;
  history: readonly StepRecord[];
  /** The database clock at the claim, and the local clock when the claim answered. */
  claimedAt: Date;
  claimedLocally: number;
  /** Stops the execution: cancelled, lease lost or worker stopping. ctx.signal is its signal. */
  abort: LazyAbortController;
  /** The execution's logger, made on first use (a child logger per execution is not free). */
  log: () => Logger;
  /** Until when fenced writes may be retried through a database outage (the lease's end). */
  writeDeadline: () => number;
  /**
   * Settles once the claim has committed (never rejects): a fenced write sent before that would not
   * see the lease and be discarded, so every write waits for it.
   */
  claimCommitted?: Promise<void>;
  /** Records a completed step durably; resolves false when the lease was lost (group-committed). */
  recordStep: (step: StepResult) => Promise<boolean>;
  /** Checks a child execution's task and data before it is started. */
  children: ChildTaskChecker;
  onStep?: (name: string, kind: StepKind, durationMs: number) => void;
}

/**
 * The ctx a handler gets. Every durable operation takes the next position (seq) in call order; at a
 * position that is already in the history it replays the recorded outcome, otherwise it runs and
 * records it with a write fenced by the lease. A recorded position whose kind or name differs from the
 * call is a non-deterministic handler, and the execution fails.
 */
export class DurableContext<E extends Record<string, TSchema> = Record<string, TSchema>> implements TaskContext<E> {
  readonly executionId: string;
  readonly attempt: number;
  readonly scheduledFor: Date;
  private seq = 0;
  private readonly nameCounts = new Map<string, number>();
  private readonly history: Map<number, StepRecord>;
  /** Child waits take turns (see awaitChild); set once one of them suspended the execution. */
  private childWaits: Promise<unknown> = Promise.resolve();
  private suspended: SuspendSignal | undefined;

  constructor(private readonly options: DurableContextOptions) {
    this.executionId = options.lease.id;
    this.attempt = options.attempt;
    this.scheduledFor = options.scheduledFor;
    this.history = new Map(options.history.map((s) => [s.seq, s]));
  }

  get signal(): AbortSignal {
    return this.options.abort.signal;
  }

  get log(): Logger {
    return this.options.log();
  }

  async step<T>(name: string, fn: () => Promise<T> | T): Promise<T> {
    const { seq, key } = this.next(name);
    const recorded = this.replay(seq, key, 'step');
    if (recorded) return recorded.result as T;
    this.throwIfAborted();
    // Past the lease's end another worker may hold the execution: running the step now could repeat
    // one that worker has already recorded.
    if (Date.now() >= this.options.writeDeadline()) throw new LeaseLostError(this.executionId);
    const started = Date.now();
    let marking: Promise<unknown> | undefined;
    const timer = setTimeout(() => {
      marking = setCurrentStep(this.options.db, this.options.lease, key).catch(() => undefined);
    }, CURRENT_STEP_DELAY_MS);
    let result: T;
    try {
      result = await fn();
    } finally {
      clearTimeout(timer);
    }
    try {
      toStorableJson(result, `the result of step ${JSON.stringify(key)}`);
    } catch (err) {
      // Running the step again would produce the same unstorable value: fail without retries.
      throw new NonRetryableError((err as Error).message);
    }
    // The current_step write must not land after the record that clears it.
    if (marking) await marking;
    // A retry after a connection cut may find the row its first try committed (see recordStepResults).
    let sent = false;
    const landed = await this.write(() => {
      const resent = sent;
      sent = true;
      return this.options.recordStep({ ...this.options.lease, seq, name: key, result, startedAt: new Date(started), resent });
    });
    if (!landed) throw new LeaseLostError(this.executionId);
    this.options.onStep?.(key, 'step', Date.now() - started);
    return result;
  }

  async sleep(name: string, duration: Duration): Promise<void> {
    const delayMs = parseDuration(duration, `sleep ${JSON.stringify(name)}`);
    await this.pause(name, 'sleep', { delayMs });
  }

  async sleepUntil(name: string, until: Date | string | number): Promise<void> {
    const wakeAt = until instanceof Date ? until : new Date(until);
    if (Number.isNaN(wakeAt.getTime())) throw new RangeError(`sleepUntil ${JSON.stringify(name)}: ${String(until)} is not a date`);
    await this.pause(name, 'sleep', { wakeAt });
  }

  async waitForEvent<K extends EventName<E>>(name: K, options: { timeout?: Duration } = {}): Promise<EventPayload<E, K>> {
    const timeoutMs = options.timeout === undefined ? undefined : parseDuration(options.timeout, `waitForEvent ${JSON.stringify(name)} timeout`);
    const outcome = await this.pause(name, 'event', timeoutMs === undefined ? { wakeAt: null } : { delayMs: timeoutMs });
    const result = outcome as { payload?: unknown; timed_out?: boolean } | undefined;
    if (!result || result.timed_out) throw new EventTimeoutError(name);
    return result.payload as EventPayload<E, K>;
  }

  // The public signatures are TaskContext's overloads; `never` lets this one stand for both.
  invoke(name: string, task: TaskDefinition | string, data?: unknown, options?: InvokeOptions): Promise<never>;
  async invoke(name: string, task: TaskDefinition | string, data?: unknown, options: InvokeOptions = {}): Promise<unknown> {
    const { seq, key } = this.next(name);
    const recorded = this.replay(seq, key, 'child');
    if (recorded?.completed) return childOutcome(seq, key, recorded.result as ChildStepResult);
    if (!recorded) await this.startChild(seq, key, task, data, options, false);
    return childOutcome(seq, key, await this.awaitChild(seq, key));
  }

  spawn(name: string, task: TaskDefinition | string, data?: unknown, options?: ChildOptions): Promise<string>;
  async spawn(name: string, task: TaskDefinition | string, data?: unknown, options: ChildOptions = {}): Promise<string> {
    const { seq, key } = this.next(name);
    const recorded = this.replay(seq, key, 'child');
    if (recorded) return (recorded.result as ChildStepResult).execution_id;
    return this.startChild(seq, key, task, data, options, true);
  }

  /** Checks the child's task and data, then inserts it with the step recording it (see startChild). */
  private async startChild(seq: number, key: string, task: TaskDefinition | string, data: unknown, options: InvokeOptions, detached: boolean): Promise<string> {
    this.throwIfAborted();
    const taskName = typeof task === 'string' ? task : task?.name;
    if (typeof taskName !== 'string') throw new TypeError(`child ${JSON.stringify(key)}: the task must be a task name or a defineTask() result`);
    let startAt: Date | undefined;
    if (options.startAt !== undefined) {
      startAt = toInstant(options.startAt);
      if (!startAt) throw new RangeError(`child ${JSON.stringify(key)}: startAt ${String(options.startAt)} is not an instant`);
    }
    const timeoutMs = options.timeout === undefined ? undefined : parseDuration(options.timeout, `invoke ${JSON.stringify(key)} timeout`);
    // Checked, against the schema too, as it will be stored (see toStoredValue).
    let stored: unknown;
    try {
      stored = toStoredValue(data, `the data of child ${JSON.stringify(key)}`);
    } catch (err) {
      throw new NonRetryableError((err as Error).message);
    }
    await this.options.children.check(taskName, stored);
    const id = newExecutionId();
    const started = Date.now();
    const childId = await this.write(() => startChild(this.options.db, this.options.lease, { id, seq, name: key, task: taskName, data: stored, startAt, detached, timeoutMs }));
    if (childId === undefined) throw new LeaseLostError(this.executionId);
    if (detached) this.options.onStep?.(key, 'child', Date.now() - started);
    return childId;
  }

  /**
   * Waits for the child recorded at `seq`: suspends the execution until it finishes, unless it has.
   * Waits of one handler take turns, so a fan-out (Promise.all of invokes) suspends once, on the
   * first unfinished child in call order; once one has suspended, the others unwind with it.
   */
  private awaitChild(seq: number, key: string): Promise<ChildStepResult> {
    const turn = this.childWaits.then(async () => {
      if (this.suspended) throw this.suspended;
      this.throwIfAborted();
      const wait = await this.write(() => suspendForChild(this.options.db, this.options.lease, seq, key));
      if (wait.kind === 'lost') throw new LeaseLostError(this.executionId);
      if (wait.kind === 'suspended') {
        this.suspended = new SuspendSignal(null);
        throw this.suspended;
      }
      return wait.result;
    });
    this.childWaits = turn.catch(() => undefined);
    return turn;
  }

  /**
   * Sleep and wait share this: replay a finished pause; finish one whose deadline has passed; otherwise
   * record the pause (once; a replay keeps the first deadline) and suspend, freeing the worker slot.
   */
  private async pause(name: string, kind: 'sleep' | 'event', when: { delayMs?: number; wakeAt?: Date | null }): Promise<unknown> {
    const { seq, key } = this.next(name);
    const recorded = this.replay(seq, key, kind);
    if (recorded?.completed) return recorded.result;
    this.throwIfAborted();
    if (recorded && recorded.wakeAt && recorded.wakeAt.getTime() <= this.databaseNow()) {
      const result = kind === 'sleep' ? { slept: true } : { timed_out: true };
      const landed = await this.write(() => completeTimedStep(this.options.db, this.options.lease, seq, result));
      if (!landed) throw new LeaseLostError(this.executionId);
      this.options.onStep?.(key, kind, Date.now() - recorded.startedAt.getTime());
      return result;
    }
    const suspended = await this.write(() =>
      suspendExecution(this.options.db, this.options.lease, {
        seq,
        name: key,
        kind,
        eventName: kind === 'event' ? name : undefined,
        wakeAt: recorded ? recorded.wakeAt : (when.wakeAt ?? null),
        delayMs: recorded ? undefined : when.delayMs,
      }),
    );
    if (!suspended) throw new LeaseLostError(this.executionId);
    throw new SuspendSignal(suspended.wakeAt);
  }

  private next(name: string): { seq: number; key: string } {
    if (typeof name !== 'string' || name.length === 0 || name.length > 200) {
      throw new TypeError('a step name must be a non-empty string of at most 200 characters');
    }
    const count = (this.nameCounts.get(name) ?? 0) + 1;
    this.nameCounts.set(name, count);
    return { seq: this.seq++, key: count === 1 ? name : `${name}#${count}` };
  }

  private replay(seq: number, key: string, kind: StepKind): StepRecord | undefined {
    const recorded = this.history.get(seq);
    if (!recorded) return undefined;
    if (recorded.kind !== kind || recorded.name !== key) {
      throw new NonDeterminismError(seq, `${recorded.kind} ${JSON.stringify(recorded.name)}`, `${kind} ${JSON.stringify(key)}`);
    }
    return recorded;
  }

  private databaseNow(): number {
    return this.options.claimedAt.getTime() + (Date.now() - this.options.claimedLocally);
  }

  private throwIfAborted(): void {
    const { abort } = this.options;
    if (abort.aborted) throw abort.reason instanceof Error ? abort.reason : new LeaseLostError(this.executionId);
  }

  private async write<T>(fn: () => Promise<T>): Promise<T> {
    await this.options.claimCommitted;
    return retryWhileUnavailable(fn, this.options.writeDeadline(), this.options.abort);
  }
}

/** A finished child step as ctx.invoke returns it: the output, or ChildExecutionError. */
function childOutcome(seq: number, key: string, result: ChildStepResult): unknown {
  // A step recorded by ctx.spawn holds only the id: the handler now invokes where it spawned.
  if (result.timed_out) throw new ChildTimeoutError(result.execution_id);
  if (result.status === undefined) throw new NonDeterminismError(seq, `spawn ${JSON.stringify(key)}`, `invoke ${JSON.stringify(key)}`);
  if (result.status === 'completed') return result.output;
  throw new ChildExecutionError(result.execution_id, result.status, result.error ?? null);
}
