import { randomUUID } from 'node:crypto';
import { computeRetryDelay, hasAttemptsLeft } from '../domain/retry';
import type { Logger } from '../logger';
import { CHANNEL_CANCEL, CHANNEL_WORK } from '../store/channels';
import type { Db } from '../store/db';
import { LazyAbortController } from './abort';
import { ChildTaskChecker } from './children';
import { CronFirer } from './cron';
import { claimExecutionsBeforeCommit, claimLimitedExecutions, completeAndClaimBeforeCommit, failExecution, releaseExecutions, renewLeases, returnUnstarted, type ClaimedExecution, type CompleteAndClaimResult, type Completion, type Lease } from '../store/leases';
import { NotificationListener } from '../store/listener';
import type { StepKind } from '../store/rows';
import { loadSteps, recordStepResults, stepKey, type StepResult } from '../store/steps';
import { upsertTasks } from '../store/tasks';
import { isDatabaseUnavailable } from '../store/db-errors';
import { toStorableJson } from '../domain/json';
import { retryWhileUnavailable } from './db-retry';
import { DurableContext } from './durable-context';
import { isNonRetryable, LeaseLostError, StoreUnavailableError, SuspendSignal } from './errors';
import { GroupCommitter, landedFlags } from '../group-commit';
import { RateMeter } from '../domain/rate-meter';
import { TaskRegistry } from './registry';
import type { TaskDefinition } from './task';

/** Hooks for metrics; the engine itself knows no metrics library. */
export interface WorkerObserver {
  claimed?(executions: ClaimedExecution[]): void;
  finished?(task: string, outcome: 'completed' | 'failed' | 'retrying' | 'suspended' | 'lost', durationMs: number): void;
  step?(task: string, kind: StepKind, durationMs: number): void;
  slots?(busy: number, free: number): void;
  databaseError?(): void;
}

export interface WorkerOptions {
  db: Db;
  databaseUrl: string;
  tasks: readonly TaskDefinition[];
  log: Logger;
  concurrency?: number;
  /**
   * Executions claimed ahead of free slots, started as slots free up. A busy worker then never waits
   * for a claim's round trip between handlers, and each statement carries more rows; an execution
   * that waited longer than `prefetchHoldMs` for a slot is handed back for other workers. Default:
   * automatic, what the worker starts in 20 ms at its current pace, between 2 and 8 times
   * `concurrency`; 0 turns prefetching off.
   */
  prefetch?: number;
  prefetchHoldMs?: number;
  leaseMs?: number;
  pollIntervalMs?: number;
  shutdownGraceMs?: number;
  observer?: WorkerObserver;
}

interface Active {
  lease: Lease;
  task: string;
  controller: LazyAbortController;
  done: Promise<void>;
  leaseExpiresAt: number;
  /** True while the handler itself runs; false once only its final write is pending. */
  inHandler: boolean;
  /** Settles (never rejects) when the claim has committed; every write of the execution waits for it. */
  claimCommitted: Promise<void>;
}

/** A claimed execution waiting in the prefetch buffer for a free slot. */
interface Buffered {
  claimed: ClaimedExecution;
  entry: Active;
  claimSentAt: number;
}

type WorkerState = 'created' | 'running' | 'stopping' | 'stopped';

/** Automatic prefetch: at most this much of the worker's own work is claimed ahead (see prefetchLimit). */
const PREFETCH_HORIZON_MS = 20;
/** Automatic prefetch, in multiples of the concurrency: never below the first (the former default), never above the second. */
const PREFETCH_MIN_FACTOR = 2;
const PREFETCH_MAX_FACTOR = 8;

/**
 * Claims due executions and runs their handlers, up to `concurrency` at once. It wakes on NOTIFY and
 * polls only as a fallback (one cheap indexed query per poll interval when idle). It renews the
 * leases it holds; an execution it lost (cancelled, taken over) has its signal aborted. stop() stops
 * claiming, lets handlers finish within the grace period, then aborts and releases the rest.
 */
export class Worker {
  readonly id = randomUUID();
  private state: WorkerState = 'created';
  private readonly registry: TaskRegistry;
  private readonly children: ChildTaskChecker;
  /** The tasks this worker claims, computed once: every claim sends them. */
  private readonly taskNames: readonly string[];
  /** The tasks claimed together, in one statement: those without a concurrency limit. */
  private readonly freeTaskNames: readonly string[];
  /** Tasks with a concurrency limit, each claimed in a locked transaction of its own (claimLimitedExecutions). */
  private readonly limits: ReadonlyMap<string, number>;
  private readonly active = new Map<string, Active>();
  private readonly listener: NotificationListener;
  private readonly completions: GroupCommitter<Completion, boolean>;
  private readonly stepRecords: GroupCommitter<StepResult, boolean>;
  private readonly concurrency: number;
  /** A fixed prefetch, or undefined for the automatic one. */
  private readonly prefetch: number | undefined;
  private readonly prefetchHoldMs: number;
  /** Handlers started per millisecond, for the automatic prefetch. */
  private readonly startRate = new RateMeter(20, () => performance.now());
  private readonly buffer: Buffered[] = [];
  /** Slots promised to claims in flight, so two claims never take more than the capacity. */
  private reserved = 0;
  /** Set when buffered executions had to be handed back (all slots stayed busy): no prefetching until a slot frees. */
  private prefetchPaused = false;
  /** Counts work notifications, so a claim can tell whether one arrived while it ran. */
  private workSeq = 0;
  private readonly leaseMs: number;
  private readonly pollIntervalMs: number;
  private readonly shutdownGraceMs: number;
  private wakeRequested = false;
  private wakeUp: (() => void) | undefined;
  private loopDone: Promise<void> | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private holdTimer: NodeJS.Timeout | undefined;
  private stopping: Promise<void> | undefined;
  private readonly localWakeTimers = new Set<NodeJS.Timeout>();
  /** Fires the tasks that declared a cron schedule, when any did. */
  private cron: CronFirer | undefined;

  constructor(private readonly options: WorkerOptions) {
    this.registry = new TaskRegistry(options.tasks);
    this.children = new ChildTaskChecker(options.db);
    this.taskNames = this.registry.names();
    this.limits = this.registry.limits();
    this.freeTaskNames = this.taskNames.filter((name) => !this.limits.has(name));
    this.concurrency = options.concurrency ?? 32;
    this.prefetch = options.prefetch;
    this.prefetchHoldMs = options.prefetchHoldMs ?? 1000;
    this.leaseMs = options.leaseMs ?? 30000;
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.shutdownGraceMs = options.shutdownGraceMs ?? 10000;
    this.listener = new NotificationListener({ url: options.databaseUrl, channels: [CHANNEL_WORK, CHANNEL_CANCEL], log: options.log });
    this.listener.on('notification', (channel: string, payload: string) => this.onNotification(channel, payload));
    this.listener.on('connected', () => {
      this.workSeq += 1;
      this.wake();
    });
    this.completions = new GroupCommitter((items: Completion[]) => this.completeAndClaim(items), isDatabaseUnavailable);
    this.stepRecords = new GroupCommitter(landedFlags((items: StepResult[]) => recordStepResults(options.db, items), (s) => stepKey(s.id, s.seq)), isDatabaseUnavailable);
  }

  /** Handlers running now. */
  private running = 0;

  /** Executions this worker holds now (running handlers and final writes in flight). */
  get busy(): number {
    return this.active.size;
  }

  /**
   * How many executions a claim may take now: room for `concurrency` running handlers plus `prefetch`
   * buffered ones, less the slots promised to claims in flight. A slot frees as soon as its handler
   * returns, so claiming overlaps with the completion commit; finished executions whose final writes
   * pile up beyond the concurrency (a slow database) still throttle claiming, so memory and leases
   * stay bounded.
   */
  private freeSlots(): number {
    const finishing = this.active.size - this.running - this.buffer.length;
    return this.capacity() - this.running - this.buffer.length - this.reserved - Math.max(0, finishing - this.concurrency);
  }

  private capacity(): number {
    return this.concurrency + (this.prefetchPaused ? 0 : this.prefetchLimit());
  }

  /**
   * Executions a claim may take ahead of free slots. Fixed when the `prefetch` option is set. Otherwise
   * it is what this worker starts in PREFETCH_HORIZON_MS at its current rate, kept between 2 and 8
   * times the concurrency: handlers slower than a claim's round trip get twice the concurrency (the
   * former fixed default), and short ones (a worker starting thousands a second) get larger claims,
   * so fewer statements carry them. Measured on a 10,000-execution drain (S2, concurrency 32), fixed
   * 2x: 16.2-19.3k/s, 8x: 21.5-21.7k/s, automatic: 19.0-21.2k/s; on 3-step workflows (S3) it stays
   * near 2x and the rate was unchanged. What it claims ahead starts within about 20 ms at the
   * worker's own pace, far inside `prefetchHoldMs`, so no other worker waits on it.
   */
  private prefetchLimit(): number {
    if (this.prefetch !== undefined) return this.prefetch;
    const wanted = Math.round(this.startRate.perMs() * PREFETCH_HORIZON_MS);
    return Math.min(PREFETCH_MAX_FACTOR * this.concurrency, Math.max(PREFETCH_MIN_FACTOR * this.concurrency, wanted));
  }

  /** The prefetch a claim would use now (for tests). */
  get prefetchNow(): number {
    return this.prefetchLimit();
  }

  /** Records the tasks in the database, starts listening and claiming. */
  async start(): Promise<void> {
    if (this.state !== 'created') throw new Error('a worker starts once');
    // Independent round trips: in parallel, so a worker is ready in one connection setup's time.
    const [tasks, listening] = await Promise.allSettled([upsertTasks(this.options.db, this.registry.toRegistrations()), this.listener.start()]);
    if (tasks.status === 'rejected' || listening.status === 'rejected') {
      await this.listener.stop();
      throw tasks.status === 'rejected' ? tasks.reason : (listening as PromiseRejectedResult).reason;
    }
    this.state = 'running';
    this.renewTimer = setInterval(() => void this.renewHeldLeases(), Math.max(200, Math.floor(this.leaseMs / 3)));
    if (this.prefetch !== 0) this.holdTimer = setInterval(() => void this.handBackStale(), Math.max(50, Math.floor(this.prefetchHoldMs / 2)));
    this.loopDone = this.loop();
    const schedules = this.registry.cronSchedules();
    if (schedules.length > 0) {
      this.cron = new CronFirer({ db: this.options.db, log: this.options.log, schedules });
      this.cron.start();
    }
    this.options.log.info({ workerId: this.id, tasks: this.taskNames, concurrency: this.concurrency }, 'worker started');
  }

  /** Idempotent; resolves when every execution is finished or released. */
  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    if (this.state === 'created') {
      this.state = 'stopped';
      return;
    }
    this.state = 'stopping';
    this.wake();
    await Promise.all([this.loopDone, this.cron?.stop()]);
    clearInterval(this.holdTimer);
    // Buffered executions never started: hand them straight back.
    await this.handBack(this.buffer.splice(0));
    const inFlight = [...this.active.values()].map((a) => a.done);
    if (inFlight.length > 0) {
      this.options.log.info({ inFlight: inFlight.length, graceMs: this.shutdownGraceMs }, 'worker draining');
      await Promise.race([Promise.all(inFlight), new Promise((r) => setTimeout(r, this.shutdownGraceMs).unref())]);
    }
    const left = [...this.active.values()];
    if (left.length > 0) {
      for (const a of left) a.controller.abort(new LeaseLostError(a.lease.id));
      const released = await releaseExecutions(this.options.db, left.map((a) => a.lease)).catch((err: Error) => {
        this.options.log.error({ err: err.message }, 'release failed; leases will expire instead');
        return new Set<string>();
      });
      this.options.log.info({ released: released.size }, 'worker released executions');
    }
    await this.completions.idle();
    clearInterval(this.renewTimer);
    for (const t of this.localWakeTimers) clearTimeout(t);
    await this.listener.stop();
    this.state = 'stopped';
    this.options.log.info({ workerId: this.id }, 'worker stopped');
  }

  private onNotification(channel: string, payload: string): void {
    if (channel === CHANNEL_WORK) {
      if (payload === '' || this.registry.get(payload)) {
        this.workSeq += 1;
        this.wake();
      }
    } else if (channel === CHANNEL_CANCEL) {
      this.active.get(payload)?.controller.abort(new LeaseLostError(payload));
      // Cancelled while buffered: never started, nothing to write; its place is free at once.
      const at = this.buffer.findIndex((b) => b.claimed.execution.id === payload);
      if (at >= 0) {
        this.buffer.splice(at, 1);
        this.active.delete(payload);
        this.wake();
      }
    }
  }

  private wake(): void {
    this.wakeRequested = true;
    this.wakeUp?.();
  }

  /** Waits for a notification, a freed slot or the poll interval, whichever comes first. */
  private async idleWait(ms: number): Promise<void> {
    if (this.wakeRequested) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wakeUp = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wakeUp = undefined;
  }

  private async loop(): Promise<void> {
    let backoff = 100;
    while (this.state === 'running') {
      // Handlers that finish in the same turn free their slots together: claim once for all of them.
      // A worker that holds nothing has no slots about to free: it claims at once (the idle pickup).
      if (this.active.size > 0) await new Promise((resolve) => setImmediate(resolve));
      const free = this.freeSlots();
      // A completion about to be written claims in its own statement (completeAndClaim): no second one.
      if (free <= 0 || this.completions.pending) {
        await this.idleWait(this.pollIntervalMs);
        this.wakeRequested = false;
        continue;
      }
      this.wakeRequested = false;
      // Tasks with a concurrency limit first, each within its limit; the others take what is left.
      const limitedTaken = this.limits.size > 0 ? await this.claimLimited() : 0;
      if (this.state !== 'running') break;
      let claimed: ClaimedExecution[];
      let committed: Promise<void>;
      // Taken before the claim is sent: the database's lease ends leaseMs after its now() in the claim,
      // which is later than this, so the local expiry never outlives the real one.
      const claimSentAt = Date.now();
      const room = limitedTaken > 0 ? this.freeSlots() : free;
      this.reserved += room;
      try {
        // Handlers start while the claim's commit is being flushed (see claimExecutionsBeforeCommit).
        const claim = await claimExecutionsBeforeCommit(this.options.db, this.freeTaskNames, room, this.leaseMs);
        claimed = claim.claimed;
        committed = claim.committed.catch((err: Error) => this.claimNotCommitted(claim.claimed, err));
        backoff = 100;
      } catch (err) {
        this.options.observer?.databaseError?.();
        this.options.log.warn({ err: (err as Error).message, backoffMs: backoff }, 'claim failed');
        await this.idleWait(backoff / 2 + Math.random() * (backoff / 2));
        backoff = Math.min(backoff * 2, 5000);
        continue;
      } finally {
        this.reserved -= room;
      }
      await this.accept(claimed, claimSentAt, committed);
      if (this.state !== 'running') break;
      // A full batch means more may be due: claim again at once.
      if (limitedTaken + claimed.length < free) await this.idleWait(this.pollIntervalMs);
    }
  }

  /**
   * Claims executions of the tasks with a concurrency limit into the free handler slots, one task at a
   * time (see claimLimitedExecutions); returns how many it claimed. Never into prefetch room: a place
   * in the limit held by a buffered execution would be one no other worker could run. A failure is
   * logged and ends the round: the next wake-up or poll tries again.
   */
  private async claimLimited(): Promise<number> {
    let taken = 0;
    for (const [task, cap] of this.limits) {
      const room = Math.min(this.freeSlots(), this.concurrency - this.running - this.buffer.length);
      if (room <= 0 || this.state !== 'running') break;
      const claimSentAt = Date.now();
      this.reserved += room;
      let claimed: ClaimedExecution[];
      try {
        claimed = await claimLimitedExecutions(this.options.db, task, cap, room, this.leaseMs);
      } catch (err) {
        this.options.observer?.databaseError?.();
        this.options.log.warn({ err: (err as Error).message, task }, 'claim failed');
        break;
      } finally {
        this.reserved -= room;
      }
      await this.accept(claimed, claimSentAt);
      taken += claimed.length;
    }
    return taken;
  }

  /**
   * The completion group commit's flush: records the completions and, in the same statement, claims
   * as many due executions as there are free slots (most of them freed by these very completions).
   */
  private async completeAndClaim(items: Completion[]): Promise<boolean[]> {
    // Executions whose final writes are pending do not count here: this statement writes them.
    // Completions still queued leave room for the flush that will write them, so that two flushes in
    // flight each claim their share and the database works on both at once.
    const free = this.capacity() - this.running - this.buffer.length - this.reserved - this.completions.queued;
    // A worker that serves tasks with a concurrency limit leaves claiming to its loop, which claims
    // those first: claimed here, a backlog of other tasks would take every slot and starve them.
    const limit = this.state === 'running' && this.limits.size === 0 ? Math.max(0, free) : 0;
    const seq = this.workSeq;
    const claimSentAt = Date.now();
    this.reserved += limit;
    let result: CompleteAndClaimResult;
    try {
      // The claimed handlers start while the commit is flushed, as a loop claim's do.
      result = await completeAndClaimBeforeCommit(this.options.db, items, this.freeTaskNames, limit, this.leaseMs);
    } finally {
      this.reserved -= limit;
    }
    const claimed = result.claimed;
    await this.accept(claimed, claimSentAt, result.committed.catch((err: Error) => this.claimNotCommitted(claimed, err)));
    // More may be due after a full batch, or after work announced while the statement ran; and tasks
    // with a concurrency limit, which this statement does not claim, may have room now.
    if ((limit > 0 && claimed.length === limit) || seq !== this.workSeq || this.limits.size > 0) this.wake();
    // The completions are durable only now; a failed commit fails them all (their callers retry).
    await result.committed;
    return items.map((i) => result.completed.has(i.id));
  }

  /** The claim's commit failed: its executions were never this worker's; stop what started of them. */
  private claimNotCommitted(claimed: ClaimedExecution[], err: Error): void {
    this.options.observer?.databaseError?.();
    this.options.log.warn({ err: err.message, executions: claimed.length }, 'claim did not commit; its handlers are stopped');
    for (const c of claimed) {
      const entry = this.active.get(c.execution.id);
      if (entry && entry.lease.token === c.execution.leaseToken) entry.controller.abort(new LeaseLostError(c.execution.id));
    }
  }

  /** Starts (or buffers) what a claim took; a worker that stopped meanwhile hands it straight back. */
  private async accept(claimed: ClaimedExecution[], claimSentAt: number, claimCommitted: Promise<void> = Promise.resolve()): Promise<void> {
    if (claimed.length === 0) return;
    if (this.state !== 'running') {
      // Stopped while claiming: never started, so hand them back as they were (their attempts
      // uncounted). Sent before the claim committed, the write would not see the lease (see below).
      await claimCommitted;
      const unstarted = claimed.map((c) => ({ id: c.execution.id, token: c.execution.leaseToken as string, previousStatus: c.previousStatus }));
      await returnUnstarted(this.options.db, unstarted).catch(() => undefined);
      return;
    }
    this.options.observer?.claimed?.(claimed);
    for (const c of claimed) this.startExecution(c, claimSentAt, claimCommitted);
    this.options.observer?.slots?.(this.running, this.concurrency - this.running);
  }

  private startExecution(claimed: ClaimedExecution, claimSentAt: number, claimCommitted: Promise<void>): void {
    const { execution } = claimed;
    const lease: Lease = { id: execution.id, token: execution.leaseToken as string };
    const controller = new LazyAbortController();
    const entry: Active = { lease, task: execution.task, controller, done: Promise.resolve(), leaseExpiresAt: claimSentAt + this.leaseMs, inHandler: false, claimCommitted };
    this.active.set(execution.id, entry);
    if (this.running < this.concurrency) this.launch(claimed, entry);
    else this.buffer.push({ claimed, entry, claimSentAt });
  }

  private launch(claimed: ClaimedExecution, entry: Active): void {
    entry.inHandler = true;
    this.running += 1;
    this.startRate.record();
    entry.done = this.runExecution(claimed, entry).finally(() => {
      this.leaveHandler(entry);
      this.active.delete(claimed.execution.id);
      // Letting go of a held execution may lift the throttle on claiming (see freeSlots).
      this.wake();
    });
  }

  /** The handler returned or threw: its slot goes to the next buffered execution, else is free. */
  private leaveHandler(entry: Active): void {
    if (!entry.inHandler) return;
    entry.inHandler = false;
    this.running -= 1;
    this.prefetchPaused = false;
    this.launchBuffered();
    this.options.observer?.slots?.(this.running, this.concurrency - this.running);
    this.wake();
  }

  private launchBuffered(): void {
    while (this.state === 'running' && this.running < this.concurrency && this.buffer.length > 0) {
      const next = this.buffer.shift() as Buffered;
      if (next.entry.controller.aborted) {
        // Cancelled while buffered: never started, nothing to write.
        this.active.delete(next.claimed.execution.id);
        continue;
      }
      this.launch(next.claimed, next.entry);
    }
  }

  /** Buffered executions that waited past prefetchHoldMs go back to the queue for other workers. */
  private async handBackStale(): Promise<void> {
    const cutoff = Date.now() - this.prefetchHoldMs;
    const stale = this.buffer.filter((b) => b.claimSentAt < cutoff);
    if (stale.length === 0) return;
    for (const b of stale) this.buffer.splice(this.buffer.indexOf(b), 1);
    // Every slot stayed busy all that time: claiming ahead again would only repeat this.
    this.prefetchPaused = true;
    await this.handBack(stale);
  }

  private async handBack(items: Buffered[]): Promise<void> {
    if (items.length === 0) return;
    for (const b of items) this.active.delete(b.claimed.execution.id);
    await Promise.all(items.map((b) => b.entry.claimCommitted));
    await returnUnstarted(this.options.db, items.map((b) => ({ ...b.entry.lease, previousStatus: b.claimed.previousStatus }))).catch((err: Error) => {
      this.options.log.warn({ err: err.message, executions: items.length }, 'could not hand back buffered executions; their leases will expire instead');
    });
    this.wake();
  }

  private async runExecution(claimed: ClaimedExecution, entry: Active): Promise<void> {
    const { execution } = claimed;
    const started = Date.now();
    // Made on first use: most executions never log (a child logger serializes its bindings).
    let child: Logger | undefined;
    const log = () => (child ??= this.options.log.child({ executionId: execution.id, task: execution.task, attempt: execution.attempt }));
    const registered = this.registry.get(execution.task);
    if (!registered) return; // claims filter by task; unreachable
    const writeDeadline = () => entry.leaseExpiresAt;
    try {
      // A fresh execution has no history: skip the read.
      const fresh = claimed.previousStatus === 'pending' && execution.attempt === 1 && execution.stepsCompleted === 0;
      const history = fresh ? [] : await retryWhileUnavailable(() => loadSteps(this.options.db, execution.id), writeDeadline());
      const ctx = new DurableContext({
        db: this.options.db,
        lease: entry.lease,
        attempt: execution.attempt,
        scheduledFor: claimed.scheduledFor,
        history,
        claimedAt: claimed.claimedAt,
        claimedLocally: started,
        abort: entry.controller,
        log,
        writeDeadline,
        claimCommitted: entry.claimCommitted,
        recordStep: (step) => this.stepRecords.submit(step),
        children: this.children,
        onStep: (_name, kind, ms) => this.options.observer?.step?.(execution.task, kind, ms),
      });
      const output = await registered.def.run(ctx as never, execution.data as never);
      this.leaveHandler(entry);
      if (entry.controller.aborted) throw entry.controller.reason;
      toStorableJson(output, 'the handler\'s return value');
      await entry.claimCommitted;
      const landed = await retryWhileUnavailable(() => this.completions.submit({ ...entry.lease, output, parentId: execution.parentId }), writeDeadline());
      if (landed) {
        if (this.options.log.isLevelEnabled('debug')) log().debug({ durationMs: Date.now() - started }, 'execution completed');
        this.options.observer?.finished?.(execution.task, 'completed', Date.now() - started);
      } else {
        log().info('result discarded: execution was cancelled or taken over');
        this.options.observer?.finished?.(execution.task, 'lost', Date.now() - started);
      }
    } catch (err) {
      await this.handleFailure(err, claimed, entry, log, started);
    }
  }

  private async handleFailure(err: unknown, claimed: ClaimedExecution, entry: Active, log: () => Logger, started: number): Promise<void> {
    this.leaveHandler(entry);
    const { execution } = claimed;
    const durationMs = Date.now() - started;
    if (err instanceof SuspendSignal) {
      if (this.options.log.isLevelEnabled('debug')) log().debug({ until: err.until }, 'execution suspended');
      this.scheduleLocalWake(err.until);
      this.options.observer?.finished?.(execution.task, 'suspended', durationMs);
      return;
    }
    if (err instanceof StoreUnavailableError) {
      // The database stayed away past the lease: abandon the attempt without recording a failure (that
      // would need the database, and an outage must not use up retries); it is taken over on expiry.
      log().warn({ err: err.message }, 'database unavailable; execution left for takeover when its lease expires');
      this.options.observer?.finished?.(execution.task, 'lost', durationMs);
      return;
    }
    if (err instanceof LeaseLostError || entry.controller.aborted) {
      log().info('execution no longer held: cancelled, taken over or released');
      this.options.observer?.finished?.(execution.task, 'lost', durationMs);
      return;
    }
    const registered = this.registry.get(execution.task);
    const retryable = !isNonRetryable(err) && registered !== undefined && hasAttemptsLeft(registered.retry, execution.attempt);
    const error = {
      type: err instanceof Error ? (err.name || 'Error').slice(0, 200) : 'Error',
      message: (err instanceof Error ? err.message : String(err)).slice(0, 4000),
      retryable,
    };
    const delay = retryable && registered ? computeRetryDelay(registered.retry, execution.attempt) : null;
    await entry.claimCommitted;
    try {
      const landed = await retryWhileUnavailable(() => failExecution(this.options.db, entry.lease, error, delay, execution.parentId), entry.leaseExpiresAt);
      if (!landed) return;
      if (delay !== null) {
        log().warn({ errorType: error.type, retryInMs: delay }, 'attempt failed; retrying');
        this.scheduleLocalWake(new Date(Date.now() + delay));
      } else log().warn({ errorType: error.type }, 'execution failed');
      this.options.observer?.finished?.(execution.task, delay !== null ? 'retrying' : 'failed', durationMs);
    } catch (writeErr) {
      log().error({ err: (writeErr as Error).message }, 'could not record failure; the lease will expire and the execution be retried');
    }
  }

  /** A pause shorter than the poll interval should not wait for the next poll. */
  private scheduleLocalWake(until: Date | null): void {
    if (!until || this.state !== 'running') return;
    const ms = until.getTime() - Date.now();
    if (ms >= this.pollIntervalMs) return;
    const timer = setTimeout(() => {
      this.localWakeTimers.delete(timer);
      this.wake();
    }, Math.max(0, ms) + 5);
    this.localWakeTimers.add(timer);
  }

  private async renewHeldLeases(): Promise<void> {
    const entries = [...this.active.values()];
    if (entries.length === 0) return;
    await Promise.all(entries.map((e) => e.claimCommitted));
    const renewedAt = Date.now();
    try {
      const held = await renewLeases(this.options.db, entries.map((e) => e.lease), this.leaseMs);
      for (const e of entries) {
        if (held.has(e.lease.id)) e.leaseExpiresAt = renewedAt + this.leaseMs;
        else if (this.active.get(e.lease.id) === e) e.controller.abort(new LeaseLostError(e.lease.id));
      }
    } catch (err) {
      this.options.observer?.databaseError?.();
      this.options.log.warn({ err: (err as Error).message }, 'lease renewal failed');
      // A lease this worker could not renew in time may already be another worker's: stop its handler
      // before it runs more steps (their records would be fenced out, but their side effects not).
      const now = Date.now();
      for (const e of entries) {
        if (e.leaseExpiresAt <= now && this.active.get(e.lease.id) === e && e.inHandler) e.controller.abort(new LeaseLostError(e.lease.id));
      }
    }
  }
}
