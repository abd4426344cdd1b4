import type { TSchema } from '@sinclair/typebox';
import { parseDuration, type Duration } from '../domain/duration';
import { checkChangeId } from '../domain/version';
import type { Jsonify } from '../domain/jsonify';
import type { Logger } from '../logger';
import type { StepKind } from '../store/rows';
import type { ReplayRecord } from '../store/steps';
import type { Wait } from '../store/transitions/suspend';
import type { ChildStepResult } from '../store/children';
import { ChildSteps } from './child-steps';
import { retryWhileUnavailable } from './db-retry';
import { checkEventName } from '../domain/event-name';
import { EventTimeoutError, LeaseLostError, NonDeterminismError, NonRetryableError, StepFailedError, usageError, WaitSupersededError } from './errors';
import { ReplayOrder } from './replay-order';
import { StepRunner, type StepOptions } from './step-runner';
import type { StepFn } from './step-attempt';
import type { DurableContextOptions, OperationContext } from './operation-context';
import { Suspension, type SuspendedUntil } from './suspension';
import type { ChildOptions, EventName, EventPayload, InvokeOptions, TaskContext, TaskDefinition } from './task';

export type { DurableContextOptions, OperationContext } from './operation-context';

/** The latest instant a durable deadline may be: the contract's timestamps have four-digit years. */
const LATEST = Date.UTC(9999, 11, 31, 23, 59, 59, 999);


/**
 * The ctx a handler gets. Every durable operation has a key, its name numbered when repeated in call
 * order; at a key already in the history it replays the recorded outcome, otherwise it runs and
 * records it with a write fenced by the lease. A recorded key of another kind is a non-deterministic
 * handler, and the execution fails. Waits (sleeps, events, children) suspend together once the
 * handler is blocked on them alone (see Suspension).
 */
export class DurableContext<E extends Record<string, TSchema> = Record<string, TSchema>> implements TaskContext<E> {
  readonly executionId: string;
  attempt: number;
  readonly scheduledFor: Date;
  readonly suspension: Suspension;
  /**
   * What the step and child helpers see, made on first use (a handler without steps never needs it)
   * and anew when a resume binds the context to a new claim.
   */
  private operation: OperationContext | undefined;
  /** Past every position known: the history's and those this run took. */
  private nextSeq: number;
  /** How many positions this run has taken, in call order: the position of the next operation. */
  private position = 0;
  /**
   * False once the history holds an operation away from its call position (written before positions
   * were checked, around a lost in-flight step): such a replay is matched by key alone.
   */
  private positional = true;
  private operations: number;
  // Per-run maps are made on first use, and the history's are shared empty ones for a fresh
  // execution: a run that records nothing allocates none of them (every execution pays for this).
  private nameCounts: Map<string, number> | undefined;
  /** The recorded operations by key, patch markers apart. */
  private readonly history: ReadonlyMap<string, ReplayRecord>;
  /** How many recorded operations this run has reached: fewer than the history holds while it replays. */
  private reached = 0;
  /** The change ids whose patch markers the history holds. */
  private readonly markers: ReadonlySet<string>;
  /** Every recorded row by position, patch markers included. */
  private readonly bySeq: ReadonlyMap<number, ReplayRecord>;
  /** Hands recorded outcomes to the handler in the order they happened. */
  private readonly order: ReplayOrder;
  /** What ctx.patched answered in this run, per change id. */
  private patches: Map<string, boolean> | undefined;
  /** Settles true once every marker this run recorded has landed (false: the lease was lost). */
  private markersLanded: Promise<boolean> | undefined;
  private steps: StepRunner | undefined;
  private childSteps: ChildSteps | undefined;

  constructor(private options: DurableContextOptions) {
    this.executionId = options.lease.id;
    this.attempt = options.attempt;
    this.scheduledFor = options.scheduledFor;
    const { history } = options;
    const fresh = history.length === 0;
    this.history = fresh ? NO_RECORDS : new Map(history.filter((s) => s.kind !== 'patch').map((s) => [s.name, s]));
    this.markers = fresh ? NO_MARKERS : new Set(history.filter((s) => s.kind === 'patch').map((s) => s.name));
    this.bySeq = fresh ? NO_POSITIONS : new Map(history.map((s) => [s.seq, s]));
    this.order = fresh ? NO_ORDER : new ReplayOrder(history);
    this.nextSeq = history.reduce((max, s) => Math.max(max, s.seq + 1), 0);
    this.operations = history.length;
    this.suspension = new Suspension((waits) => this.suspend(waits));
  }

  private get bound(): OperationContext {
    return (this.operation ??= this.bindOperation());
  }

  private get stepRunner(): StepRunner {
    return (this.steps ??= new StepRunner(() => this.bound));
  }

  private get children(): ChildSteps {
    return (this.childSteps ??= new ChildSteps(() => this.bound));
  }

  /** The position the next new operation takes: a history row at or past it was recorded elsewhere. */
  get recordedUpTo(): number {
    return this.nextSeq;
  }

  /**
   * Resumes a suspended context on a new claim of its execution in this process, instead of replaying
   * its handler: binds it to the claim (lease, clocks, deadlines), settles each wait the history shows
   * over (a sleep whose time came, a delivered event, a finished child, a due retry) and leaves the
   * rest registered. `records` are the execution's rows for the pending waits and any past
   * `recordedUpTo`. Returns false, changing nothing, when they show that another process moved the
   * execution on meanwhile: then the caller replays from the history as usual.
   */
  async resume(claim: Pick<DurableContextOptions, 'lease' | 'attempt' | 'claimedAt' | 'claimedLocally' | 'log' | 'writeDeadline' | 'claimCommitted' | 'deadline' | 'trace'>, records: readonly ReplayRecord[]): Promise<boolean> {
    const bySeq = new Map(records.map((r) => [r.seq, r]));
    const pending = this.suspension.pending;
    if (records.some((r) => r.seq >= this.nextSeq) || pending.some((b) => !bySeq.get(b.wait.seq) || bySeq.get(b.wait.seq)?.outcome)) return false;
    this.options = { ...this.options, ...claim };
    this.attempt = claim.attempt;
    this.operation = undefined;
    const finished = new Map<number, ReplayRecord>();
    for (const { wait } of pending) {
      const record = bySeq.get(wait.seq) as ReplayRecord;
      if (record.completed || (wait.kind === 'step' && record.wakeAt && record.wakeAt.getTime() <= this.databaseNow())) finished.set(wait.seq, record);
      else if (record.wakeAt && record.wakeAt.getTime() <= this.databaseNow()) {
        const result = wait.kind === 'sleep' ? { slept: true } : { timed_out: true };
        const timed = await this.write(() => this.options.backend.completeTimedStep(this.options.lease, wait.seq, result));
        if (timed.kind === 'lost') throw new LeaseLostError(this.executionId);
        if (timed.kind === 'completed') this.options.progressed?.();
        if (timed.kind !== 'not_due') {
          finished.set(wait.seq, { ...record, completed: true, result: timed.result });
          if (wait.kind !== 'child') this.options.onStep?.(wait.name, wait.kind, Date.now() - record.startedAt.getTime());
        }
      }
    }
    this.suspension.reopen(finished);
    return true;
  }

  private bindOperation(): OperationContext {
    // Every field named, no spread: a spread into an object this wide takes V8's slow path. The
    // `satisfies` makes a field added to the options, optional ones included, a compile error here.
    const o = this.options;
    return {
      backend: o.backend,
      lease: o.lease,
      attempt: o.attempt,
      scheduledFor: o.scheduledFor,
      history: o.history,
      claimedAt: o.claimedAt,
      claimedLocally: o.claimedLocally,
      abort: o.abort,
      log: o.log,
      writeDeadline: o.writeDeadline,
      claimCommitted: o.claimCommitted,
      recordStep: o.recordStep,
      children: o.children,
      retry: o.retry,
      limits: o.limits,
      deadline: o.deadline,
      onStep: o.onStep,
      progressed: o.progressed,
      trace: o.trace,
      write: (fn) => this.write(fn),
      suspension: this.suspension,
      databaseNow: () => this.databaseNow(),
      throwIfAborted: () => this.throwIfAborted(),
    } satisfies { [K in keyof Required<OperationContext>]: OperationContext[K] };
  }

  get signal(): AbortSignal {
    return this.options.abort.signal;
  }

  get log(): Logger {
    return this.options.log();
  }

  async step<T>(name: string, fn: StepFn<T>, options: StepOptions = {}): Promise<Jsonify<Awaited<T>>> {
    const { seq, key, recorded } = this.next(name, 'step');
    if (recorded?.completed || recorded?.outcome === 'failed') {
      const turn = this.turn(seq);
      if (turn) await turn;
    }
    if (recorded?.completed) return recorded.result as Jsonify<Awaited<T>>;
    if (recorded?.outcome === 'failed') throw new StepFailedError(key, recorded.error ?? { type: 'Error', message: 'step failed', retryable: false });
    this.throwIfAborted();
    return this.stepRunner.run(seq, key, fn, options, recorded) as Promise<Jsonify<Awaited<T>>>;
  }

  async sleep(name: string, duration: Duration): Promise<void> {
    const delayMs = usage(() => parseDuration(duration, `sleep ${JSON.stringify(name)}`));
    await this.pause(name, 'sleep', () => this.deadlineIn(delayMs, `sleep ${JSON.stringify(name)}`));
  }

  async sleepUntil(name: string, until: Date | string | number): Promise<void> {
    const wakeAt = until instanceof Date ? until : new Date(until);
    if (Number.isNaN(wakeAt.getTime())) throw usageError(new RangeError(`sleepUntil ${JSON.stringify(name)}: ${String(until)} is not a date`));
    if (wakeAt.getTime() > LATEST || wakeAt.getUTCFullYear() < 1) throw usageError(new RangeError(`sleepUntil ${JSON.stringify(name)}: ${wakeAt.toISOString()} is outside the years 0001-9999`));
    await this.pause(name, 'sleep', () => wakeAt);
  }

  async waitForEvent<K extends EventName<E>>(name: K, options: { timeout?: Duration } = {}): Promise<EventPayload<E, K>> {
    const what = `waitForEvent ${JSON.stringify(name)} timeout`;
    usage(() => checkEventName(name));
    const timeoutMs = options.timeout === undefined ? undefined : usage(() => parseDuration(options.timeout as Duration, what));
    const outcome = await this.pause(name, 'event', () => (timeoutMs === undefined ? null : this.deadlineIn(timeoutMs, what)));
    const result = outcome as { payload?: unknown; timed_out?: boolean } | undefined;
    if (!result || result.timed_out) throw new EventTimeoutError(name);
    return result.payload as EventPayload<E, K>;
  }

  // The public signatures are TaskContext's overloads; `never` lets this one stand for both.
  invoke(name: string, task: TaskDefinition | string, data?: unknown, options?: InvokeOptions): Promise<never>;
  async invoke(name: string, task: TaskDefinition | string, data?: unknown, options: InvokeOptions = {}): Promise<unknown> {
    const { seq, key, recorded } = this.next(name, 'child');
    if (recorded?.completed) {
      const turn = this.turn(seq);
      if (turn) await turn;
    }
    return this.children.invoke(seq, key, recorded, task, data, options);
  }

  spawn(name: string, task: TaskDefinition | string, data?: unknown, options?: ChildOptions): Promise<string>;
  async spawn(name: string, task: TaskDefinition | string, data?: unknown, options: ChildOptions = {}): Promise<string> {
    const { seq, key, recorded } = this.next(name, 'child');
    if (recorded) {
      const turn = recorded.completed ? this.turn(seq) : undefined;
      if (turn) await turn;
      return (recorded.result as ChildStepResult).execution_id;
    }
    return this.children.start(seq, key, task, data, options, true);
  }

  patched(changeId: string): boolean {
    checkChangeId('ctx.patched', changeId);
    const patches = (this.patches ??= new Map());
    let answer = patches.get(changeId);
    if (answer !== undefined) return answer;
    // The first run recorded its marker here, at this call's position: a replay takes that position.
    const atPosition = this.bySeq.get(this.position);
    if (atPosition?.kind === 'patch' && atPosition.name === changeId) this.position += 1;
    // Recorded: this execution took the new path here before. Else a replay that has not yet reached
    // the end of its history is re-running code that ran without the change: the old path.
    answer = this.markers.has(changeId) || !this.replaying();
    if (answer && !this.markers.has(changeId)) this.recordMarker(changeId);
    patches.set(changeId, answer);
    return answer;
  }

  deprecatePatch(changeId: string): void {
    checkChangeId('ctx.deprecatePatch', changeId);
    if (this.patches?.get(changeId) ?? (this.markers.has(changeId) || !this.replaying())) {
      // Recorded as patched() would: code that still asks patched() (a worker not yet rolled) replays it.
      this.patched(changeId);
      return;
    }
    throw new NonDeterminismError(this.reached, null, { kind: 'patch', name: changeId }, `the history was recorded before this change: keep ctx.patched(${JSON.stringify(changeId)}) until every such execution has finished`);
  }

  /**
   * Settles once every patch marker this run recorded has landed; throws LeaseLostError when one was
   * fenced out. Every later write waits for it (a marker must be durable before anything recorded
   * after it, or a replay would take the old path over the new path's steps), and so does the
   * completion (see ExecutionRunner). Undefined when this run recorded none, the common case: writes
   * then pay nothing for patches.
   */
  markersRecorded(): Promise<void> | undefined {
    const landed = this.markersLanded;
    return landed?.then((ok) => {
      if (!ok) throw new LeaseLostError(this.executionId);
    });
  }

  /** True while recorded operations remain that this run has not reached. */
  private replaying(): boolean {
    return this.reached < this.history.size;
  }

  /** Records a patch marker at the next position, after any marker before it; see markersRecorded. */
  private recordMarker(changeId: string): void {
    const marker = { ...this.options.lease, seq: this.takePosition(), name: changeId, kind: 'patch' as const, result: null, startedAt: new Date() };
    const previous = this.markersLanded;
    this.markersLanded = (async () => {
      if (previous && !(await previous)) return false;
      await this.options.claimCommitted;
      return retryWhileUnavailable(() => this.options.recordStep(marker), this.options.writeDeadline(), this.options.abort);
    })();
    // Observed by the next write or the completion; a run that ends before either must not leave it unhandled.
    this.markersLanded.catch(() => undefined);
  }

  /**
   * Sleep and wait share this: replay a finished pause; finish one whose deadline has passed (in a
   * statement that checks it: an event delivered first wins); otherwise block on it. A replay keeps
   * the first deadline; a new one is computed on the database's clock when the handler asks.
   */
  private async pause(name: string, kind: 'sleep' | 'event', deadline: () => Date | null): Promise<unknown> {
    const { seq, key, recorded } = this.next(name, kind);
    if (recorded?.completed || recorded?.outcome === 'cancelled') {
      const turn = this.turn(seq);
      if (turn) await turn;
    }
    if (recorded?.completed) return recorded.result;
    if (recorded?.outcome === 'cancelled') throw new WaitSupersededError(name, key);
    this.throwIfAborted();
    if (recorded?.wakeAt && recorded.wakeAt.getTime() <= this.databaseNow()) {
      // In flight: no suspension may begin on the other waits before this one is known to be over.
      const result = kind === 'sleep' ? { slept: true } : { timed_out: true };
      const timed = await this.suspension.track(() => this.write(() => this.options.backend.completeTimedStep(this.options.lease, seq, result)));
      if (timed.kind === 'lost') throw new LeaseLostError(this.executionId);
      if (timed.kind === 'completed') this.options.progressed?.();
      if (timed.kind !== 'not_due') {
        this.options.onStep?.(key, kind, Date.now() - recorded.startedAt.getTime());
        return timed.result;
      }
    }
    const wakeAt = recorded ? recorded.wakeAt : deadline();
    this.options.trace?.event(kind === 'sleep' ? 'stepwise.sleep' : 'stepwise.wait_for_event', { 'stepwise.step': key, ...(wakeAt ? { 'stepwise.wake_at': wakeAt.toISOString() } : {}) });
    return this.suspension.block({ seq, name: key, kind, eventName: kind === 'event' ? name : undefined, wakeAt }, (r) => r.result);
  }

  /** Allocates the operation's key and position, and finds its record in the history. */
  private next(name: string, kind: StepKind): { seq: number; key: string; recorded: ReplayRecord | undefined } {
    if (typeof name !== 'string' || name.length === 0 || name.length > 200) {
      throw usageError(new TypeError('a step name must be a non-empty string of at most 200 characters'));
    }
    const nameCounts = (this.nameCounts ??= new Map());
    const count = (nameCounts.get(name) ?? 0) + 1;
    nameCounts.set(name, count);
    const key = count === 1 ? name : `${name}#${count}`;
    const position = this.position++;
    const atPosition = this.positional ? this.bySeq.get(position) : undefined;
    // Operations take positions in call order, so a replay must meet the history's operations where
    // they were recorded: one added, skipped or moved is a divergence, named here (patches exist for
    // intended changes). A position the history lacks was an operation whose record never landed.
    if (atPosition && (atPosition.kind !== kind || atPosition.name !== key)) {
      throw new NonDeterminismError(position, { kind: atPosition.kind, name: atPosition.name }, { kind, name: key });
    }
    const recorded = atPosition ?? this.history.get(key);
    if (recorded) {
      if (recorded.kind !== kind) throw new NonDeterminismError(recorded.seq, { kind: recorded.kind, name: key }, { kind, name: key });
      if (recorded.seq !== position) this.positional = false;
      this.reached += 1;
      return { seq: recorded.seq, key, recorded };
    }
    if (this.operations >= this.options.limits.operations) {
      throw new NonRetryableError(`execution ${this.executionId} reached the limit of ${this.options.limits.operations} durable operations (at ${kind} ${JSON.stringify(key)})`);
    }
    this.operations += 1;
    return { seq: this.positionFor(position), key, recorded: undefined };
  }

  /**
   * Undefined when a recorded outcome may be handed over now, else its turn (see ReplayOrder), held as
   * in flight: no suspension may begin while a recorded outcome is still to come.
   */
  private turn(seq: number): Promise<void> | undefined {
    const turn = this.order.turn(seq);
    return turn && this.suspension.track(() => turn);
  }

  /** The position a new operation is recorded at: its call position when free, else past every known one. */
  private positionFor(position: number): number {
    if (this.positional && !this.bySeq.has(position)) {
      this.nextSeq = Math.max(this.nextSeq, position + 1);
      return position;
    }
    return this.nextSeq++;
  }

  /** A new position for a patch marker, in call order like an operation's. */
  private takePosition(): number {
    return this.positionFor(this.position++);
  }

  /** `delayMs` from now on the database's clock, within the years a timestamp can be written in. */
  private deadlineIn(delayMs: number, what: string): Date {
    const at = this.databaseNow() + delayMs;
    if (at > LATEST) throw usageError(new RangeError(`${what}: ${delayMs} ms from now is past the year 9999`));
    return new Date(at);
  }

  private async suspend(waits: readonly Wait[]): Promise<SuspendedUntil> {
    this.throwIfAborted();
    const first = waits.reduce((a, b) => (b.seq < a.seq ? b : a));
    const superseded = this.suspension.takeSuperseded();
    const suspended = await this.write(() => this.options.backend.suspend(this.options.lease, waits, this.options.deadline, first.name, superseded));
    if (!suspended) throw new LeaseLostError(this.executionId);
    // Counted from the answer's arrival: late by its trip back, never early, whatever the clocks' skew.
    const wakeLocally = suspended.dueInMs === null ? null : Date.now() + suspended.dueInMs;
    return { wakeAt: suspended.wakeAt, wakeLocally };
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
    const markers = this.markersRecorded();
    if (markers) await markers;
    return retryWhileUnavailable(fn, this.options.writeDeadline(), this.options.abort);
  }
}

const NO_RECORDS: ReadonlyMap<string, ReplayRecord> = new Map();
const NO_MARKERS: ReadonlySet<string> = new Set();
const NO_POSITIONS: ReadonlyMap<number, ReplayRecord> = new Map();
const NO_ORDER = new ReplayOrder([]);


/** Runs a check of a ctx call's arguments; what it throws fails the execution at once (see usageError). */
function usage<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    throw err instanceof Error ? usageError(err) : err;
  }
}
