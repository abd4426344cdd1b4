import { randomUUID } from 'node:crypto';
import { GroupCommitter } from '../group-commit';
import { mayPrefetch, type FlowPolicy } from '../domain/flow';
import type { ClaimedExecution, ClaimTask, CompleteAndClaimResult } from '../store/transitions/claim';
import type { ThrottledClaim } from '../store/transitions/claim-throttled';
import type { Completion } from '../store/transitions/complete';
import { RemoteWorkerBackend } from '../remote/remote-backend';
import { CronFirer } from './cron';
import { DirectWorkerBackend } from './direct-backend';
import { ExecutionRunner } from './execution-runner';
import { renewHeldLeases } from './lease-renewal';
import { TaskRegistry } from './registry';
import { ProgressAnnouncer } from './progress-announcer';
import { SlotPool, type HeldExecution } from './slot-pool';
import { IDLE_POLL_STRETCH, WakeSignal } from './wake-signal';
import type { ClaimAnswer, WorkerBackend, WorkSignals } from './worker-backend';
import { DEFAULT_LIMITS, type WorkerOptions } from './worker-options';
import { presenceTimings, WorkerPresence } from './worker-presence';

export type { WorkerObserver, WorkerOptions } from './worker-options';

/**
 * When a worker's registration changed a task's keys, how long until it keys the task's unfinished
 * executions once more: long enough for schedules in flight during the change to have committed.
 */
const REKEY_AGAIN_MS = 10_000;

/** How long a completion waits for other handlers' completions to share its statement. */
const COMPLETION_LINGER_MS = 2;

/** The port a worker's options ask for: theirs, the remote API server's, or the database's. */
function backendFor(options: WorkerOptions): WorkerBackend {
  if (options.backend) return options.backend;
  if (options.remote) return new RemoteWorkerBackend({ ...options.remote, log: options.log });
  if (!options.db || options.databaseUrl === undefined) throw new TypeError('a worker needs db and databaseUrl, or remote: { url, token }');
  return new DirectWorkerBackend(options.db, options.databaseUrl, options.listener);
}

/** A worker's life: it claims only while running; stopping lets go of what it holds. */
export const WORKER_STATES = Object.freeze({ created: 'created', running: 'running', stopping: 'stopping', stopped: 'stopped' } as const);
export type WorkerState = (typeof WORKER_STATES)[keyof typeof WORKER_STATES];

/**
 * Claims due executions and runs their handlers, up to `concurrency` at once. It wakes on NOTIFY and
 * polls only as a fallback (one cheap indexed query per poll interval when idle). It renews the
 * leases it holds; an execution it lost (cancelled, taken over) has its signal aborted. stop() stops
 * claiming, lets handlers finish within the grace period, then aborts and releases the rest.
 */
export class Worker {
  readonly id = randomUUID();
  /** Where its operations go: the database, or an API server (remote). */
  private readonly backend: WorkerBackend;
  private state: WorkerState = WORKER_STATES.created;
  private readonly registry: TaskRegistry;
  /** The tasks this worker claims, computed once: every claim sends them. */
  private readonly taskNames: readonly string[];
  /** The tasks claimed together, in one statement, with their versions: those without a concurrency or rate limit. */
  private freeTasks: readonly ClaimTask[];
  /** The tasks of which this worker starts new executions: its version is current (see startingTasks). */
  private starting: ReadonlySet<string>;
  private versionsRead: Promise<void> | undefined;
  /** Tasks with a concurrency or rate limit, each claimed in a locked transaction of its own (claimThrottledExecutions). */
  private readonly limits: ReadonlyMap<string, FlowPolicy>;
  /** Per throttled task, the key its last claim ended on: keys take turns from one claim to the next. */
  private readonly cursors = new Map<string, string>();
  /** Which limited task the next completion flush claims (they take turns). */
  private limitedTurn = 0;
  private readonly slots: SlotPool;
  private readonly runner: ExecutionRunner;
  /** Tells API servers' streams of steps recorded, apart from the step writes. */
  private readonly progress: ProgressAnnouncer;
  private readonly notifications: WorkSignals;
  /** Completions, written with the next claim in one statement (completeAndClaim). */
  private readonly completions: GroupCommitter<Completion, boolean>;
  private readonly leaseMs: number;
  private readonly pollIntervalMs: number;
  private readonly shutdownGraceMs: number;
  private readonly signal = new WakeSignal();
  private loopDone: Promise<void> | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  /** The second pass over executions whose keys changed at registration (see rekeyExecutions). */
  private rekeyTimer: NodeJS.Timeout | undefined;
  private stopping: Promise<void> | undefined;
  /** Fires the tasks that declared a cron schedule, when any did. */
  private cron: CronFirer | undefined;
  /** This worker's row in `stepwise.workers`: registered, heartbeat, stopping, gone. */
  private readonly presence: WorkerPresence;

  constructor(private readonly options: WorkerOptions) {
    this.registry = new TaskRegistry(options.tasks);
    this.taskNames = this.registry.names();
    const backend = (this.backend = backendFor(options));
    // A claim that waits on an API server is flow-controlled there: all tasks go in one claim.
    this.limits = backend.claimWaits ? new Map() : this.registry.throttled();
    // Registering makes this worker's versions current: it starts new executions until a later one registers.
    this.starting = new Set(this.taskNames);
    this.freeTasks = this.claimTasks();
    this.leaseMs = options.leaseMs ?? 30000;
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.shutdownGraceMs = options.shutdownGraceMs ?? 10000;
    const { log } = options;
    const prefetchHoldMs = options.prefetchHoldMs ?? 1000;
    this.slots = new SlotPool({ backend, log, concurrency: options.concurrency ?? 32, prefetch: options.prefetch, prefetchHoldMs, leaseMs: this.leaseMs, onFreed: () => this.signal.wakeForRoom() });
    // The completion is group-committed by the worker, whose flush claims too (completeAndClaim).
    const complete = (completion: Completion) => this.completions.submit(completion);
    const limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.progress = new ProgressAnnouncer({ run: (sql) => this.notifications.run(sql), log, windowMs: options.progressWindowMs });
    const progressed = (id: string) => this.progress.add(id);
    this.runner = new ExecutionRunner({ backend, log, registry: this.registry, observer: options.observer, complete, limits, keepSuspended: options.keepSuspended ?? 256, onHandlerReturned: (held) => this.leaveHandler(held), progressed, tracing: options.tracing });
    const serves = (task: string) => this.registry.get(task) !== undefined;
    this.notifications = backend.listen(
      {
        serves,
      onWork: () => this.signal.wake(),
      // A delayed start: wake at its time, not at a poll.
      onWorkIn: (delayMs) => this.signal.wakeAt(Date.now() + delayMs),
      onCancel: (id) => (this.slots.cancel(id), this.runner.forget(id)),
      onTaskRegistered: () => void this.readVersions(),
      onStreams: () => this.progress.streamsOpen(() => this.slots.heldExecutions().map((h) => h.lease.id)),
      onListening: () => this.progress.askForStreams(),
      },
      log,
    );
    // While other handlers run, a completion waits a moment for theirs: a worker of few slots would
    // otherwise write statements of a few rows, and PostgreSQL's cost per statement is what bounds a
    // fleet of small workers (docs/benchmarks.md, "Many processes"). A lone execution's is written at once.
    const linger = () => (this.slots.runningCount > 0 ? COMPLETION_LINGER_MS : 0);
    this.completions = new GroupCommitter((items: Completion[]) => this.completeAndClaim(items), (err) => backend.isUnavailable(err), { linger });
    this.presence = new WorkerPresence({
      backend,
      log,
      workerId: this.id,
      tasks: this.registry.served(),
      concurrency: this.slots.concurrency,
      running: () => this.slots.runningCount,
      ...presenceTimings(options),
      onDatabaseError: () => options.observer?.databaseError?.(),
      onStarting: (starting) => this.useStarting(starting),
    });
  }

  /** The tasks the batched claim takes, each with its version and whether it starts new executions. */
  private claimTasks(): ClaimTask[] {
    return this.registry
      .served()
      .filter((t) => !this.limits.has(t.name))
      .map((t) => ({ ...t, startsNew: this.starting.has(t.name) }));
  }

  /**
   * Reads which tasks this worker starts new executions of (startingTasks): when another version
   * became current, it only drains what is pinned to its own; when the current version's workers
   * are gone, it starts them again. One read at a time; a failure keeps the last answer.
   */
  private readVersions(): Promise<void> {
    this.versionsRead ??= this.backend.startingTasks(this.registry.served())
      .then((starting) => this.useStarting(starting))
      .catch((err: Error) => this.options.log.warn({ err: err.message }, 'reading the current task versions failed'))
      .finally(() => (this.versionsRead = undefined));
    return this.versionsRead;
  }

  /** What a read of startingTasks found (at start, on a registration, at each heartbeat). */
  private useStarting(starting: Set<string>): void {
    const changed = this.taskNames.filter((t) => starting.has(t) !== this.starting.has(t));
    if (changed.length === 0) return;
    this.starting = starting;
    this.freeTasks = this.claimTasks();
    const draining = this.taskNames.filter((t) => !starting.has(t));
    this.options.log.info({ workerId: this.id, draining, starting: [...starting] }, 'task versions changed: new executions start on the current version');
    this.signal.wake();
  }

  /** Executions this worker holds now (running handlers and final writes in flight). */
  get busy(): number {
    return this.slots.heldCount;
  }

  /** The prefetch a claim would use now (for tests). */
  get prefetchNow(): number {
    return this.slots.prefetchLimit();
  }

  /** Records the tasks and registers the worker in the database, starts listening and claiming. */
  async start(): Promise<void> {
    if (this.state !== WORKER_STATES.created) throw new Error('a worker starts once');
    // Registered before its tasks: registering them makes its versions current and tells the other
    // workers, which must then find it live, or they go on starting executions on the old version
    // until their next read. Listening is independent, in parallel.
    const registered = this.presence.start(this.registry.toRegistrations());
    const started = await Promise.allSettled([registered, this.notifications.start()]);
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) {
      await Promise.all([this.notifications.stop(), this.presence.stop()]);
      throw failed.reason;
    }
    this.state = WORKER_STATES.running;
    const rekeyed = (started[0] as PromiseFulfilledResult<string[]>).value;
    if (rekeyed.length > 0) {
      this.rekeyTimer = setTimeout(() => {
        this.backend.rekeyExecutions(rekeyed).catch((err: Error) => this.options.log.warn({ err: err.message, tasks: rekeyed }, 'keying executions again failed'));
      }, REKEY_AGAIN_MS);
      this.rekeyTimer.unref();
    }
    // Renewed at a third of the lease, so a failed renewal or two do not lose it.
    const renewal = { backend: this.backend, log: this.options.log, leaseMs: this.leaseMs, onDatabaseError: () => this.options.observer?.databaseError?.() };
    this.renewTimer = setInterval(() => void renewHeldLeases(this.slots, renewal), Math.max(200, Math.floor(this.leaseMs / 3)));
    this.slots.startHoldTimer();
    // Another version may have registered since; and a current version's workers may all go away.
    // (Each heartbeat reads them again: see WorkerPresence's onStarting.)
    void this.readVersions();
    this.loopDone = this.loop();
    const schedules = this.registry.cronSchedules();
    if (schedules.length > 0) {
      this.cron = new CronFirer({ fire: (task, data, fireAt) => this.backend.fireCron(task, data, fireAt), log: this.options.log, schedules });
      this.cron.start();
    }
    this.options.log.info({ workerId: this.id, tasks: this.taskNames, concurrency: this.slots.concurrency }, 'worker started');
  }

  /** Idempotent; resolves when every execution is finished or released. */
  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    if (this.state === WORKER_STATES.created) {
      this.state = WORKER_STATES.stopped;
      await this.notifications.stop();
      return;
    }
    this.state = WORKER_STATES.stopping;
    this.signal.wake();
    this.backend.interruptClaims();
    // Not awaited here: the shutdown goes on while the mark is written (stop() below waits for it).
    void this.presence.markStopping();
    await Promise.all([this.loopDone, this.cron?.stop()]);
    await this.slots.drain(this.shutdownGraceMs);
    await this.completions.idle();
    this.progress.stop();
    clearInterval(this.renewTimer);
    clearTimeout(this.rekeyTimer);
    this.signal.clearTimers();
    await Promise.all([this.notifications.stop(), this.presence.stop()]);
    this.state = WORKER_STATES.stopped;
    this.options.log.info({ workerId: this.id }, 'worker stopped');
  }

  private async loop(): Promise<void> {
    let backoff = 100;
    let idlePolls = 0;
    while (this.state === WORKER_STATES.running) {
      // Handlers that finish in the same turn free their slots together: claim once for all of them.
      // A worker that holds nothing has no slots about to free: it claims at once (the idle pickup).
      if (this.slots.heldCount > 0) await new Promise((resolve) => setImmediate(resolve));
      const free = this.slots.freeSlots();
      // A completion about to be written claims in its own statement (completeAndClaim): no second one.
      if (free <= 0 || (this.completions.pending && !this.backend.claimWaits)) {
        await this.signal.wait(this.pollIntervalMs);
        this.signal.reset();
        continue;
      }
      this.signal.reset();
      // Tasks with a concurrency or rate limit first, each within its limits; the others take what is left.
      const limitedTaken = this.limits.size > 0 ? await this.claimLimited() : 0;
      if (this.state !== WORKER_STATES.running) break;
      let claimed: ClaimedExecution[];
      let committed: Promise<void>;
      let claim: ClaimAnswer;
      // Taken before the claim is sent: the database's lease ends leaseMs after its now() in the claim,
      // which is later than this, so the local expiry never outlives the real one.
      const claimSentAt = Date.now();
      const room = limitedTaken > 0 ? this.slots.freeSlots() : free;
      const epoch = this.signal.epoch;
      // What could start at once, for a remote claim's limited tasks (before this claim's reservation).
      const runnable = this.backend.claimWaits ? this.slots.roomForLimited() : 0;
      this.slots.reserveSlots(room);
      try {
        // Handlers start while the claim's commit is being flushed (see claimExecutionsBeforeCommit).
        claim = await this.backend.claim(this.freeTasks, room, this.leaseMs, this.id, runnable);
        claimed = claim.claimed;
        this.options.observer?.claim?.(room, claimed.length);
        const taken = claimed;
        committed = claim.committed.catch((err: Error) => this.claimNotCommitted(taken, err));
        backoff = 100;
      } catch (err) {
        this.options.observer?.databaseError?.();
        this.options.log.warn({ err: (err as Error).message, backoffMs: backoff }, 'claim failed');
        await this.signal.wait(backoff / 2 + Math.random() * (backoff / 2));
        backoff = Math.min(backoff * 2, 5000);
        continue;
      } finally {
        this.slots.unreserveSlots(room);
      }
      await this.accept(claimed, claim.leasedFrom ?? claimSentAt, committed);
      if (claim.throttled) for (const t of claim.throttled) this.options.observer?.throttled?.(t.task, t.limit);
      if (this.state !== WORKER_STATES.running) break;
      // A claim that waited for work claims again at once, unless it came back early with nothing.
      if (this.backend.claimWaits) {
        if (claimed.length === 0 && Date.now() - claimSentAt < this.pollIntervalMs) await this.signal.wait(this.pollIntervalMs);
        continue;
      }
      // A full batch means more may be due: claim again at once.
      if (limitedTaken + claimed.length < free) {
        this.noteShortClaim(epoch);
        // Polls that find nothing, with nothing announced meanwhile, space out (IDLE_POLL_STRETCH).
        idlePolls = limitedTaken + claimed.length === 0 && this.signal.epoch === epoch ? idlePolls + 1 : 0;
        await this.signal.wait(this.pollIntervalMs * Math.min(2 ** idlePolls, IDLE_POLL_STRETCH));
      }
    }
  }

  /**
   * Claims executions of the tasks with a concurrency or rate limit into the free handler slots, one
   * task at a time; returns how many it claimed. Into prefetch room only for a keyed concurrency limit
   * without a rate limit (see mayPrefetch). A failure is logged and ends the round: the next wake-up
   * or poll tries again.
   */
  private async claimLimited(): Promise<number> {
    let taken = 0;
    for (const [task, policy] of this.limits) {
      const runnable = this.slots.roomForLimited();
      const want = mayPrefetch(policy) ? this.slots.freeSlots() : runnable;
      if (want <= 0 || this.state !== WORKER_STATES.running) break;
      try {
        taken += (await this.claimOneLimited(task, policy, runnable, want)).claimed.length;
      } catch (err) {
        this.options.observer?.databaseError?.();
        this.options.log.warn({ err: (err as Error).message, task }, 'claim failed');
        break;
      }
    }
    return taken;
  }

  /**
   * One claim of a limited task into `want` slots, `runnable` of them free handler slots, with
   * `completions` recorded in the same transaction (see claimThrottledExecutions). The next claim of
   * the task starts after the key this one ended on. A claim that stopped at a key's share while the
   * key had more wakes the loop at once; one that found another worker claiming the task, within
   * 5-25 ms rather than at the next poll. The handlers start while the commit is flushed.
   */
  private async claimOneLimited(task: string, policy: FlowPolicy, runnable: number, want: number, completions: Completion[] = []): Promise<ThrottledClaim> {
    const claimSentAt = Date.now();
    this.slots.reserveSlots(want);
    let claim: ThrottledClaim;
    try {
      claim = await this.backend.claimThrottled({ name: task, version: this.registry.get(task)?.version ?? '', startsNew: this.starting.has(task) }, policy, want, this.leaseMs, this.id, this.cursors.get(task) ?? '', runnable, completions);
    } finally {
      this.slots.unreserveSlots(want);
    }
    this.cursors.set(task, claim.cursor);
    if (want > 0) this.options.observer?.claim?.(want, claim.claimed.length);
    if (claim.heldBy) this.options.observer?.throttled?.(task, claim.heldBy);
    if (claim.more) this.signal.wake();
    else if (claim.contended) this.signal.wakeAt(Date.now() + 5 + Math.random() * 20);
    const claimed = claim.claimed;
    await this.accept(claimed, claimSentAt, claim.committed.catch((err: Error) => this.claimNotCommitted(claimed, err)));
    return claim;
  }

  /**
   * The completion group commit's flush: records the completions and, in the same statement, claims
   * as many due executions as there are free slots (most of them freed by these very completions).
   */
  private async completeAndClaim(items: Completion[]): Promise<boolean[]> {
    if (this.limits.size > 0) return this.completeAndClaimLimited(items);
    const free = this.slots.roomForCompletions(this.completions.queued);
    // Nothing is due when the last claim came back short and no work was announced since.
    // A claim that waits for work is the loop's alone: a completion claims nothing then.
    const limit = this.state === WORKER_STATES.running && !this.signal.queueKnownEmpty && !this.backend.claimWaits ? Math.max(0, free) : 0;
    const seq = this.notifications.workSeq;
    const epoch = this.signal.epoch;
    const claimSentAt = Date.now();
    this.slots.reserveSlots(limit);
    let result: CompleteAndClaimResult;
    try {
      // The claimed handlers start while the commit is flushed, as a loop claim's do.
      result = await this.backend.completeAndClaim(items, this.freeTasks, limit, this.leaseMs, this.id);
    } finally {
      this.slots.unreserveSlots(limit);
    }
    const claimed = result.claimed;
    if (limit > 0) this.options.observer?.claim?.(limit, claimed.length);
    await this.accept(claimed, claimSentAt, result.committed.catch((err: Error) => this.claimNotCommitted(claimed, err)));
    // More may be due after a full batch, or after work announced while the statement ran.
    if ((limit > 0 && claimed.length === limit) || seq !== this.notifications.workSeq) this.signal.wake();
    else if (limit > 0) this.noteShortClaim(epoch);
    // The completions are durable only now; a failed commit fails them all (their callers retry).
    await result.committed;
    return items.map((i) => result.completed.has(i.id));
  }

  /**
   * The completion flush of a worker with limited tasks: the completions, then a claim of one limited
   * task (each flush the next one), in one transaction and one commit (see claimThrottledExecutions).
   * The claim sees the places these completions free. The loop claims the other tasks.
   */
  private async completeAndClaimLimited(items: Completion[]): Promise<boolean[]> {
    const entries = [...this.limits];
    const [task, policy] = entries[this.limitedTurn++ % entries.length];
    const running = this.state === WORKER_STATES.running;
    const runnable = running ? Math.max(0, this.slots.roomForLimitedCompletions(this.completions.queued)) : 0;
    const want = running && mayPrefetch(policy) ? Math.max(0, this.slots.roomForCompletions(this.completions.queued)) : runnable;
    const claim = await this.claimOneLimited(task, policy, runnable, want, items);
    // The loop claims the other tasks.
    this.signal.wake();
    // The completions are durable only now; a failed commit fails them all (their callers retry).
    await claim.committed;
    return items.map((i) => claim.completed.has(i.id));
  }

  /** The claim's commit failed: its executions were never this worker's; stop what started of them. */
  private claimNotCommitted(claimed: ClaimedExecution[], err: Error): void {
    this.options.observer?.databaseError?.();
    this.options.log.warn({ err: err.message, executions: claimed.length }, 'claim did not commit; its handlers are stopped');
    this.slots.abortClaim(claimed);
    // Its executions are due again, and no notification says so.
    this.signal.wake();
  }

  /** Starts (or buffers) what a claim took; a worker that stopped meanwhile hands it straight back. */
  private async accept(claimed: ClaimedExecution[], claimSentAt: number, claimCommitted: Promise<void> = Promise.resolve()): Promise<void> {
    if (claimed.length === 0) return;
    // Stopped while claiming: never started, so hand them back as they were.
    if (this.state !== WORKER_STATES.running) return this.slots.returnClaim(claimed, claimCommitted);
    this.options.observer?.claimed?.(claimed);
    for (const c of claimed) {
      const held = this.slots.admit(c, claimSentAt, claimCommitted);
      if (held) this.launch(c, held);
    }
    this.reportSlots();
  }

  /** Runs an execution in the slot it was given; lets go of it once its final write settled. */
  private launch(claimed: ClaimedExecution, held: HeldExecution): void {
    // Two handlers, as a finally would: a rejection (a throwing observer) still lets go, and stays one.
    held.done = this.runner.run(claimed, held).then(
      (outcome) => {
        // This worker claims what it paused when it comes due: it still holds the handler (resumed
        // without a replay). Other workers find it by their poll only should this one not claim it.
        if ((outcome.kind === 'suspended' || outcome.kind === 'retrying') && outcome.wakeLocally !== null && this.state === WORKER_STATES.running) this.signal.wakeAt(outcome.wakeLocally);
        this.letGo(held);
      },
      (err: unknown) => {
        this.letGo(held);
        throw err;
      },
    );
  }

  private letGo(held: HeldExecution): void {
    this.leaveHandler(held);
    this.slots.forget(held);
    // Letting go of a held execution may lift the throttle on claiming (see SlotPool.freeSlots).
    this.signal.wakeForRoom();
  }

  /** The handler returned or threw: its slot goes to the next buffered execution, else is free. */
  private leaveHandler(held: HeldExecution): void {
    if (!this.slots.leaveHandler(held)) return;
    while (this.state === WORKER_STATES.running) {
      const next = this.slots.takeBuffered();
      if (next === undefined) break;
      this.launch(next.claimed, next.held);
    }
    this.reportSlots();
    this.signal.wakeForRoom();
  }

  /**
   * A claim of the unlimited tasks came back short: none of them is due. Limited tasks are claimed by
   * keys in turn, so a freed slot may still let one of them in: their workers claim on every one.
   */
  private noteShortClaim(epoch: number): void {
    if (this.limits.size === 0) this.signal.queueEmpty(epoch);
  }

  private reportSlots(): void {
    this.options.observer?.slots?.(this.slots.runningCount, this.slots.concurrency - this.slots.runningCount);
  }
}
