import { toFaithfulJson } from '../domain/json';
import { describeThrown, describeThrownWithStack } from '../domain/thrown';
import { computeRetryDelay, hasAttemptsLeft } from '../domain/retry';
import { GroupCommitter, landedFlags } from '../group-commit';
import type { Logger } from '../logger';
import { type ClaimedExecution } from '../store/transitions/claim';
import { type Completion } from '../store/transitions/complete';
import type { StepKind } from '../store/rows';
import type { AttemptTrace, Tracing } from '../telemetry/tracing';
import { stepKey, type StepResult } from '../store/steps';
import { retryWhileUnavailable } from './db-retry';
import type { LazyAbortController } from './abort';
import { DurableContext } from './durable-context';
import type { DurableContextOptions } from './operation-context';
import { ExecutionTimeoutError, isNonRetryable, LeaseLostError, NonRetryableError, StoreUnavailableError } from './errors';
import type { TaskDefinition } from './task';
import type { TaskRegistry } from './registry';
import type { HeldExecution } from './slot-pool';
import type { SuspendedUntil } from './suspension';
import type { WorkerBackend } from './worker-backend';

/** How one run of a claimed execution ended; the worker acts on it (a pause wakes it up early). */
export type ExecutionOutcome =
  /** Its completion landed. */
  | { readonly kind: 'completed' }
  /** Failed for good, recorded. */
  | { readonly kind: 'failed' }
  /** Failed, recorded, due again at wakeLocally (this process's clock). */
  | { readonly kind: 'retrying'; readonly wakeLocally: number }
  /** Paused (sleep, event, child), recorded; due again when it has a deadline (see SuspendedUntil). */
  | ({ readonly kind: 'suspended' } & Readonly<SuspendedUntil>)
  /** No longer this worker's: cancelled, taken over or released; its write, if any, was fenced out. */
  | { readonly kind: 'lost' }
  /** The database was away or refused the final write: left for takeover when the lease expires. */
  | { readonly kind: 'abandoned' };

// The outcomes without data are shared: a run allocates nothing to report them.
const COMPLETED: ExecutionOutcome = Object.freeze({ kind: 'completed' });
const FAILED: ExecutionOutcome = Object.freeze({ kind: 'failed' });
const LOST: ExecutionOutcome = Object.freeze({ kind: 'lost' });
const ABANDONED: ExecutionOutcome = Object.freeze({ kind: 'abandoned' });

/** The hooks of WorkerObserver that concern one run of an execution. */
export interface ExecutionObserver {
  finished?(task: string, outcome: 'completed' | 'failed' | 'retrying' | 'suspended' | 'lost', durationMs: number): void;
  step?(task: string, kind: StepKind, durationMs: number): void;
  /** A stopped handler (cancelled, timed out, lease lost) left running without its slot (+1), or ending at last (-1). */
  detached?(delta: 1 | -1): void;
}

export interface ExecutionRunnerOptions {
  backend: WorkerBackend;
  log: Logger;
  registry: TaskRegistry;
  observer?: ExecutionObserver;
  /** Writes a completion (the worker group-commits it with its next claim); false when the lease was lost. */
  complete: (completion: Completion) => Promise<boolean>;
  /** Largest JSON of a step result or output, in bytes; most durable operations per execution. */
  limits: { valueBytes: number; operations: number };
  /** Suspended handlers kept to resume without a replay (0: always replay). */
  keepSuspended: number;
  /** The handler returned or threw: its slot may serve another execution while the final write runs. */
  onHandlerReturned: (held: HeldExecution) => void;
  /** The execution moved on within its status (a step recorded, a sleep ended): see ProgressAnnouncer. */
  progressed?: (executionId: string) => void;
  /** Spans of attempts and steps; null (or absent) when tracing is off. */
  tracing?: Tracing | null;
}

/**
 * Runs one claimed execution: loads its history, runs its handler in a DurableContext whose steps are
 * group-committed, writes the completion or the failure (retried with backoff, or final), and returns
 * the outcome. It owns no slot and no lease: both belong to the HeldExecution it is given.
 */
export class ExecutionRunner {
  /** Step records of all running executions, written together (see GroupCommitter). */
  private readonly stepRecords: GroupCommitter<StepResult, boolean>;
  private readonly live: LiveHandlers;

  constructor(private readonly options: ExecutionRunnerOptions) {
    this.live = new LiveHandlers(options.keepSuspended);
    const { backend } = options;
    this.stepRecords = new GroupCommitter(landedFlags((items: StepResult[]) => backend.recordStepResults(items), (s) => stepKey(s.id, s.seq)), (err) => backend.isUnavailable(err));
  }

  /** Never rejects for the handler's sake: every failure ends in an outcome. */
  run(claimed: ClaimedExecution, held: HeldExecution): Promise<ExecutionOutcome> {
    // Untraced, a run costs this check alone: no span, no wrapping promise.
    const tracing = this.options.tracing;
    return tracing ? this.runTraced(tracing, claimed, held) : this.runClaimed(claimed, held, undefined);
  }

  /** run() inside the span of this claimed run (see Tracing.startAttempt), ended with the outcome. */
  private async runTraced(tracing: Tracing, claimed: ClaimedExecution, held: HeldExecution): Promise<ExecutionOutcome> {
    const { execution } = claimed;
    const span = tracing.startAttempt({
      executionId: execution.id,
      task: execution.task,
      attempt: execution.attempt,
      taskVersion: this.options.registry.get(execution.task)?.version ?? '',
      previousStatus: claimed.previousStatus,
      traceparent: execution.traceparent,
    });
    try {
      const outcome = await this.runClaimed(claimed, held, span);
      if (outcome.kind === 'suspended' && outcome.wakeAt) span.setAttributes({ 'stepwise.wake_at': outcome.wakeAt.toISOString() });
      span.end(outcome.kind);
      return outcome;
    } catch (err) {
      span.end('error');
      throw err;
    }
  }

  private async runClaimed(claimed: ClaimedExecution, held: HeldExecution, span: AttemptTrace | undefined): Promise<ExecutionOutcome> {
    const { execution } = claimed;
    const started = Date.now();
    // Made on first use: most executions never log (a child logger serializes its bindings).
    let child: Logger | undefined;
    const log = () => (child ??= this.options.log.child({ executionId: execution.id, task: execution.task, attempt: execution.attempt }));
    const registered = this.options.registry.get(execution.task);
    if (!registered) return LOST; // claims filter by task; unreachable
    const writeDeadline = () => held.leaseExpiresAt;
    const deadline = registered.timeoutMs === undefined ? null : new Date(claimed.startedAt.getTime() + registered.timeoutMs);
    let stopTimer: NodeJS.Timeout | undefined;
    try {
      if (deadline) {
        // On the database's clock, as the deadline is: the claim's now() and the local time since.
        const left = deadline.getTime() - claimed.claimedAt.getTime() - (Date.now() - claimed.claimedLocally);
        const timeout = new ExecutionTimeoutError(execution.id, registered.timeoutMs as number);
        if (left <= 0) throw timeout;
        stopTimer = setTimeout(() => held.controller.abort(timeout), left);
      }
      const claim = { lease: held.lease, attempt: execution.attempt, claimedAt: claimed.claimedAt, claimedLocally: claimed.claimedLocally, log, writeDeadline, claimCommitted: held.claimCommitted, deadline, trace: span };
      let live = claimed.previousStatus === 'waiting' ? await this.resumeLive(execution.id, claim, held) : undefined;
      if (!live) {
        // A fresh execution has no history: skip the read.
        const fresh = claimed.previousStatus === 'pending' && execution.attempt === 1 && execution.stepsCompleted === 0;
        const history = fresh ? [] : await retryWhileUnavailable(() => this.options.backend.loadReplayHistory(execution.id), writeDeadline());
        // Every field named, no spread: a spread into an object this wide takes V8's slow path, a
        // cost each execution would pay.
        const ctx = new DurableContext({
          lease: claim.lease,
          attempt: claim.attempt,
          claimedAt: claim.claimedAt,
          claimedLocally: claim.claimedLocally,
          log: claim.log,
          writeDeadline: claim.writeDeadline,
          claimCommitted: claim.claimCommitted,
          deadline: claim.deadline,
          trace: claim.trace,
          backend: this.options.backend,
          scheduledFor: claimed.scheduledFor,
          history,
          abort: held.controller,
          recordStep: (step) => this.stepRecords.submit(step),
          children: this.options.backend.children,
          retry: registered.retry,
          limits: this.options.limits,
          onStep: (_name, kind, ms) => this.options.observer?.step?.(execution.task, kind, ms),
          progressed: () => this.options.progressed?.(execution.id),
        } satisfies { [K in keyof Required<DurableContextOptions>]: DurableContextOptions[K] });
        live = startHandler(registered.def, ctx, execution.data, held.controller, span);
      }
      const ended = await this.race(live, held);
      this.options.onHandlerReturned(held);
      if (ended.kind === 'suspended') {
        // Kept, so that this process resumes it without a replay if it claims it again.
        this.live.keep(execution.id, live);
        if (this.options.log.isLevelEnabled('debug')) log().debug({ until: ended.wakeAt }, 'execution suspended');
        this.options.observer?.finished?.(execution.task, 'suspended', Date.now() - started);
        return { kind: 'suspended', wakeAt: ended.wakeAt, wakeLocally: ended.wakeLocally };
      }
      live.ctx.suspension.close();
      // Most handlers leave nothing behind: then no promise is made for it.
      if (!live.ctx.suspension.settled) await this.settleLeftovers(live, held);
      if (ended.kind === 'threw') throw ended.error;
      if (held.controller.aborted) throw held.controller.reason;
      const output = toOutput(ended.output, this.options.limits.valueBytes);
      await held.claimCommitted;
      // A patch marker recorded late must land before the completion (a lost lease throws here).
      const markers = live.ctx.markersRecorded();
      if (markers) await markers;
      // A completion that cannot be written is handled below like the handler's own failure.
      const landed = await retryWhileUnavailable(() => this.options.complete({ id: held.lease.id, token: held.lease.token, output, parentId: execution.parentId }), writeDeadline());
      if (landed) {
        if (this.options.log.isLevelEnabled('debug')) log().debug({ durationMs: Date.now() - started }, 'execution completed');
        this.options.observer?.finished?.(execution.task, 'completed', Date.now() - started);
        return COMPLETED;
      }
      log().info('result discarded: execution was cancelled or taken over');
      this.options.observer?.finished?.(execution.task, 'lost', Date.now() - started);
      return LOST;
    } catch (err) {
      return await this.settleFailure(err, claimed, held, log, started, span);
    } finally {
      clearTimeout(stopTimer);
    }
  }

  /**
   * Resumes a handler this process suspended, when it has it still: loads only the rows of what it
   * waits for (and any recorded elsewhere since), and settles those that are over. Undefined when it
   * is not kept or cannot resume (the execution moved on elsewhere): the caller replays instead.
   */
  private async resumeLive(id: string, claim: Parameters<DurableContext['resume']>[0], held: HeldExecution): Promise<LiveHandler | undefined> {
    const live = this.live.take(id);
    if (!live) return undefined;
    const pending = live.ctx.suspension.pending.map((b) => b.wait.seq);
    const records = await retryWhileUnavailable(() => this.options.backend.loadReplayRecords(id, pending, live.ctx.recordedUpTo), claim.writeDeadline());
    // A stop of this claim stops the handler: its signal is the first claim's.
    held.controller.onAbort((reason) => live.abort.abort(reason));
    return (await live.ctx.resume(claim, records)) ? live : undefined;
  }

  /**
   * Waits until the handler returns or throws, its execution suspends, or the execution is stopped
   * (cancelled, timed out, lease lost): then the handler is left to run on detached, its slot given
   * back at once; nothing it does afterwards can be recorded (every write is fenced by the lease).
   */
  private race(live: LiveHandler, held: HeldExecution): Promise<HandlerEnd> {
    return new Promise<HandlerEnd>((resolve) => {
      let settled = false;
      live.ended.then(resolve).finally(() => {
        settled = true;
      });
      live.ctx.suspension.onSuspended({
        suspended: (until) => resolve({ kind: 'suspended', ...until }),
        failed: (error: unknown) => resolve({ kind: 'threw', error }),
      });
      held.controller.onAbort((reason) => {
        // The handler is still running: let it go on without its slot.
        if (settled) return;
        resolve({ kind: 'threw', error: reason });
        this.options.observer?.detached?.(1);
        void live.ended.then(() => this.options.observer?.detached?.(-1));
      });
    });
  }

  /**
   * What the handler left behind when it ended, before the execution ends with it: a step still
   * running (a Promise.all that a sibling failed) is let finish and is recorded, so it never runs
   * again on a retry; waits left open (a race's losing branch) are closed. Stops early on an abort.
   */
  private async settleLeftovers(live: LiveHandler, held: HeldExecution): Promise<void> {
    const { suspension } = live.ctx;
    await new Promise<void>((resolve) => {
      void suspension.idle().then(resolve);
      held.controller.onAbort(() => resolve());
    });
    const open = suspension.abandoned.map((w) => w.seq);
    if (open.length === 0 || held.controller.aborted) return;
    await held.claimCommitted;
    const closed = await retryWhileUnavailable(() => this.options.backend.closeOpenWaits(held.lease, open), held.leaseExpiresAt);
    if (!closed) throw new LeaseLostError(held.lease.id);
  }

  /** Drops a kept handler (its execution was cancelled): it will not be resumed here. */
  forget(id: string): void {
    this.live.take(id);
  }

  private async settleFailure(thrown: unknown, claimed: ClaimedExecution, held: HeldExecution, log: () => Logger, started: number, span: AttemptTrace | undefined): Promise<ExecutionOutcome> {
    this.options.onHandlerReturned(held);
    let err = thrown;
    const { execution } = claimed;
    const durationMs = Date.now() - started;
    if (err instanceof StoreUnavailableError) {
      // The database stayed away past the lease: abandon the attempt without recording a failure (that
      // would need the database, and an outage must not use up retries); it is taken over on expiry.
      log().warn({ err: err.message }, 'database unavailable; execution left for takeover when its lease expires');
      this.options.observer?.finished?.(execution.task, 'lost', durationMs);
      return ABANDONED;
    }
    // A timeout is recorded as the execution's failure; any other stop means it is no longer ours.
    const stop: unknown = held.controller.aborted ? held.controller.reason : undefined;
    if (stop instanceof ExecutionTimeoutError) err = stop;
    else if (stop !== undefined || err instanceof LeaseLostError) {
      log().info({ reason: describeThrown(stop ?? err, false).type }, 'execution no longer held: cancelled, taken over or released');
      this.options.observer?.finished?.(execution.task, 'lost', durationMs);
      return LOST;
    }
    const registered = this.options.registry.get(execution.task);
    // The budget counts attempts since one last recorded a step: progress starts it over.
    const attempts = Math.max(1, execution.attemptsSinceProgress);
    const retryable = !isNonRetryable(err) && registered !== undefined && hasAttemptsLeft(registered.retry, attempts);
    const error = describeThrown(err, retryable);
    const delay = retryable && registered ? computeRetryDelay(registered.retry, attempts) : null;
    span?.fail(error);
    await held.claimCommitted;
    try {
      const landed = await retryWhileUnavailable(() => this.options.backend.fail(held.lease, error, delay, execution.parentId, describeThrownWithStack(err, retryable)), held.leaseExpiresAt);
      if (!landed) return LOST;
      if (delay !== null) {
        log().warn({ errorType: error.type, retryInMs: delay }, 'attempt failed; retrying');
        this.options.observer?.finished?.(execution.task, 'retrying', durationMs);
        // The database's now() plus the delay passed before the answer came: this comes no earlier.
        return { kind: 'retrying', wakeLocally: Date.now() + delay };
      }
      log().warn({ errorType: error.type }, 'execution failed');
      this.options.observer?.finished?.(execution.task, 'failed', durationMs);
      return FAILED;
    } catch (writeErr) {
      log().error({ err: (writeErr as Error).message }, 'could not record failure; the lease will expire and the execution be retried');
      return ABANDONED;
    }
  }
}

/** How a handler's run ended, as the runner sees it. */
type HandlerEnd = { kind: 'returned'; output: unknown } | { kind: 'threw'; error: unknown } | ({ kind: 'suspended' } & SuspendedUntil);

/** A handler that has started, with its context and the first claim's abort controller (its signal). */
interface LiveHandler {
  ctx: DurableContext;
  /** Settles when the handler returns or throws; never rejects. */
  ended: Promise<HandlerEnd>;
  abort: LazyAbortController;
}

/** Starts the handler; under the attempt's span when traced, so spans it makes itself nest under it. */
function startHandler(def: TaskDefinition, ctx: DurableContext, data: unknown, abort: LazyAbortController, span: AttemptTrace | undefined): LiveHandler {
  const run = () => def.run(ctx as never, data as never);
  const ended = Promise.resolve()
    .then(() => (span ? span.run(run) : run()))
    .then(
      (output): HandlerEnd => ({ kind: 'returned', output }),
      (error: unknown): HandlerEnd => ({ kind: 'threw', error }),
    );
  return { ctx, ended, abort };
}

/**
 * Suspended handlers this process keeps, to resume without a replay: a long history then costs a
 * resume no more than a short one. Bounded; the oldest goes first, and a dropped one is replayed.
 */
class LiveHandlers {
  private readonly kept = new Map<string, LiveHandler>();

  constructor(private readonly max: number) {}

  keep(id: string, live: LiveHandler): void {
    if (this.max <= 0) return;
    this.kept.delete(id);
    this.kept.set(id, live);
    if (this.kept.size > this.max) this.kept.delete(this.kept.keys().next().value as string);
  }

  take(id: string): LiveHandler | undefined {
    const live = this.kept.get(id);
    this.kept.delete(id);
    return live;
  }
}

/** The handler's return value as it will be stored; one JSON cannot hold, or too large, fails the execution for good. */
function toOutput(output: unknown, maxBytes: number): unknown {
  try {
    return toFaithfulJson(output, "the handler's return value", { maxBytes });
  } catch (err) {
    throw new NonRetryableError((err as Error).message);
  }
}
