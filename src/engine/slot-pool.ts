import { RateMeter } from '../domain/rate-meter';
import type { Logger } from '../logger';
import { type Lease } from '../store/leases';
import { type ClaimedExecution } from '../store/transitions/claim';
import { LazyAbortController } from './abort';
import { ExecutionCancelledError, ExecutionReleasedError, LeaseLostError } from './errors';
import type { WorkerBackend } from './worker-backend';

/** An execution a worker holds, from its claim until its final write settles. */
export interface HeldExecution {
  readonly lease: Lease;
  readonly task: string;
  readonly controller: LazyAbortController;
  done: Promise<void>;
  leaseExpiresAt: number;
  /** True while the handler itself runs; false once only its final write is pending. */
  inHandler: boolean;
  /** Settles (never rejects) when the claim has committed; every write of the execution waits for it. */
  readonly claimCommitted: Promise<void>;
}

/** A claimed execution waiting in the prefetch buffer for a free slot. */
export interface BufferedExecution {
  readonly claimed: ClaimedExecution;
  readonly held: HeldExecution;
  readonly claimSentAt: number;
}

/** Automatic prefetch: at most this much of the worker's own work is claimed ahead (see prefetchLimit). */
const PREFETCH_HORIZON_MS = 20;
/** Automatic prefetch, in multiples of the concurrency: never below the first (the former default), never above the second. */
const PREFETCH_MIN_FACTOR = 2;
const PREFETCH_MAX_FACTOR = 8;

export interface SlotPoolOptions {
  backend: WorkerBackend;
  log: Logger;
  concurrency: number;
  /** A fixed prefetch, or undefined for the automatic one. */
  prefetch: number | undefined;
  prefetchHoldMs: number;
  leaseMs: number;
  /** Room was freed outside a handler's return (a hand-back, a cancel): claiming may resume. */
  onFreed: () => void;
}

/**
 * The handler slots of a worker and the executions it holds: up to `concurrency` running handlers, a
 * prefetch buffer of claimed executions waiting for a slot, and slots promised to claims in flight.
 * It sizes the prefetch and hands back what waited too long. It starts no handler itself: admit() and
 * takeBuffered() give the slot, the caller runs the execution.
 */
export class SlotPool {
  readonly concurrency: number;
  /** A fixed prefetch, or undefined for the automatic one. */
  private readonly prefetch: number | undefined;
  private readonly leaseMs: number;
  private readonly held = new Map<string, HeldExecution>();
  private readonly buffer: BufferedExecution[] = [];
  /** Handlers running now. */
  private running = 0;
  /** Slots promised to claims in flight, so two claims never take more than the capacity. */
  private reserved = 0;
  /** Set when buffered executions had to be handed back (all slots stayed busy): no prefetching until a slot frees. */
  private prefetchPaused = false;
  /** Handlers started per millisecond, for the automatic prefetch. */
  private readonly startRate = new RateMeter(20, () => performance.now());
  private holdTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: SlotPoolOptions) {
    this.concurrency = options.concurrency;
    this.prefetch = options.prefetch;
    this.leaseMs = options.leaseMs;
  }

  /** Executions held now: running handlers, buffered ones and final writes in flight. */
  get heldCount(): number {
    return this.held.size;
  }

  /** Handlers running now. */
  get runningCount(): number {
    return this.running;
  }

  /** True while `held` is still what this pool holds under its id (not let go, not claimed anew). */
  holds(held: HeldExecution): boolean {
    return this.held.get(held.lease.id) === held;
  }

  /** A snapshot of the executions held now. */
  heldExecutions(): HeldExecution[] {
    return [...this.held.values()];
  }

  /**
   * How many executions a claim may take now: room for `concurrency` running handlers plus `prefetch`
   * buffered ones, less the slots promised to claims in flight. A slot frees as soon as its handler
   * returns, so claiming overlaps with the completion commit; finished executions whose final writes
   * pile up beyond the concurrency (a slow database) still throttle claiming, so memory and leases
   * stay bounded.
   */
  freeSlots(): number {
    const finishing = this.held.size - this.running - this.buffer.length;
    return this.capacity() - this.running - this.buffer.length - this.reserved - Math.max(0, finishing - this.concurrency);
  }

  /**
   * Room for the claim of a completion flush. Executions whose final writes are pending do not count:
   * that statement writes them. Completions still queued leave room for the flush that will write
   * them, so that two flushes in flight each claim their share and the database works on both at once.
   */
  roomForCompletions(queuedCompletions: number): number {
    return this.capacity() - this.running - this.buffer.length - this.reserved - queuedCompletions;
  }

  /**
   * Room for a task with an unkeyed concurrency limit or a rate limit: free handler slots only, never
   * prefetch room, since a place in the limit held by a buffered execution would be one no other
   * worker could run, and a start counted at the claim must not begin later.
   */
  roomForLimited(): number {
    return Math.min(this.freeSlots(), this.concurrency - this.running - this.buffer.length);
  }

  /**
   * roomForLimited for the claim of a completion flush: the free handler slots, counting those of the
   * executions being completed as free (that statement writes them).
   */
  roomForLimitedCompletions(queuedCompletions: number): number {
    return Math.min(this.roomForCompletions(queuedCompletions), this.concurrency - this.running - this.buffer.length - this.reserved);
  }

  /** Promises slots to a claim in flight; unreserveSlots once it has answered (or failed). */
  reserveSlots(count: number): void {
    this.reserved += count;
  }

  unreserveSlots(count: number): void {
    this.reserved -= count;
  }

  private capacity(): number {
    return this.concurrency + (this.prefetchPaused ? 0 : this.prefetchLimit());
  }

  /**
   * Executions a claim may take ahead of free slots. Fixed when the `prefetch` option is set. Otherwise
   * it is what this worker starts in PREFETCH_HORIZON_MS at its current rate, kept between 2 and 8
   * times the concurrency: handlers slower than a claim's round trip get twice the concurrency (the
   * former fixed default), and short ones get larger claims, so fewer statements carry them. What it
   * claims ahead starts within PREFETCH_HORIZON_MS at the worker's own pace, far inside
   * `prefetchHoldMs`, so no other worker waits on it.
   */
  prefetchLimit(): number {
    if (this.prefetch !== undefined) return this.prefetch;
    const wanted = Math.round(this.startRate.perMs() * PREFETCH_HORIZON_MS);
    return Math.min(PREFETCH_MAX_FACTOR * this.concurrency, Math.max(PREFETCH_MIN_FACTOR * this.concurrency, wanted));
  }

  /**
   * Holds a claimed execution. When a handler slot is free, takes it and returns the execution for the
   * caller to run now; otherwise buffers it until takeBuffered() hands it out, and returns undefined.
   */
  admit(claimed: ClaimedExecution, claimSentAt: number, claimCommitted: Promise<void>): HeldExecution | undefined {
    const { execution } = claimed;
    const lease: Lease = { id: execution.id, token: execution.leaseToken as string };
    const controller = new LazyAbortController();
    const held: HeldExecution = { lease, task: execution.task, controller, done: Promise.resolve(), leaseExpiresAt: claimSentAt + this.leaseMs, inHandler: false, claimCommitted };
    this.held.set(execution.id, held);
    if (this.running < this.concurrency) {
      this.takeSlot(held);
      return held;
    }
    this.buffer.push({ claimed, held, claimSentAt });
    return undefined;
  }

  /** The next buffered execution, its slot taken, while a slot is free; undefined when none may start. */
  takeBuffered(): BufferedExecution | undefined {
    while (this.running < this.concurrency && this.buffer.length > 0) {
      const next = this.buffer.shift() as BufferedExecution;
      if (next.held.controller.aborted) {
        // Cancelled while buffered: never started, nothing to write.
        this.held.delete(next.claimed.execution.id);
        continue;
      }
      this.takeSlot(next.held);
      return next;
    }
    return undefined;
  }

  private takeSlot(held: HeldExecution): void {
    held.inHandler = true;
    this.running += 1;
    this.startRate.record();
  }

  /** The handler returned or threw: frees its slot. False when it had left it already. */
  leaveHandler(held: HeldExecution): boolean {
    if (!held.inHandler) return false;
    held.inHandler = false;
    this.running -= 1;
    this.prefetchPaused = false;
    return true;
  }

  /** The execution's final write settled: it is held no more. */
  forget(held: HeldExecution): void {
    this.held.delete(held.lease.id);
  }

  /** The claim's commit failed: aborts the handlers started of it (none holds its lease). */
  abortClaim(claimed: ClaimedExecution[]): void {
    for (const c of claimed) {
      const held = this.held.get(c.execution.id);
      if (held && held.lease.token === c.execution.leaseToken) held.controller.abort(new LeaseLostError(c.execution.id));
    }
  }

  /**
   * A claim that arrived once the worker stopped: hands it back as it was (attempts uncounted). Sent
   * before the claim committed, the write would not see the lease, so it waits for the commit.
   */
  async returnClaim(claimed: ClaimedExecution[], claimCommitted: Promise<void>): Promise<void> {
    await claimCommitted;
    const unstarted = claimed.map((c) => ({ id: c.execution.id, token: c.execution.leaseToken as string, previousStatus: c.previousStatus }));
    await this.options.backend.returnUnstarted(unstarted).catch(() => undefined);
  }

  /** A cancel: aborts the execution's handler; one still buffered is dropped and its place freed. */
  cancel(id: string): void {
    this.held.get(id)?.controller.abort(new ExecutionCancelledError(id));
    // Cancelled while buffered: never started, nothing to write; its place is free at once.
    const at = this.buffer.findIndex((b) => b.claimed.execution.id === id);
    if (at >= 0) {
      this.buffer.splice(at, 1);
      this.held.delete(id);
      this.options.onFreed();
    }
  }

  /** Starts handing back buffered executions held past prefetchHoldMs (never, without prefetching). */
  startHoldTimer(): void {
    if (this.prefetch !== 0) this.holdTimer = setInterval(() => void this.handBackStale(), Math.max(50, Math.floor(this.options.prefetchHoldMs / 2)));
  }

  /** Buffered executions that waited past prefetchHoldMs go back to the queue for other workers. */
  private async handBackStale(): Promise<void> {
    const cutoff = Date.now() - this.options.prefetchHoldMs;
    const stale = this.buffer.filter((b) => b.claimSentAt < cutoff);
    if (stale.length === 0) return;
    for (const b of stale) this.buffer.splice(this.buffer.indexOf(b), 1);
    // Every slot stayed busy all that time: claiming ahead again would only repeat this.
    this.prefetchPaused = true;
    await this.handBack(stale);
  }

  private async handBack(items: BufferedExecution[]): Promise<void> {
    if (items.length === 0) return;
    for (const b of items) this.held.delete(b.claimed.execution.id);
    await Promise.all(items.map((b) => b.held.claimCommitted));
    await this.options.backend.returnUnstarted(items.map((b) => ({ ...b.held.lease, previousStatus: b.claimed.previousStatus }))).catch((err: Error) => {
      this.options.log.warn({ err: err.message, executions: items.length }, 'could not hand back buffered executions; their leases will expire instead');
    });
    this.options.onFreed();
  }

  /**
   * Lets go of everything once claiming has stopped: buffered executions go straight back (never
   * started), running ones get `graceMs` to finish, then the rest are aborted and released.
   */
  async drain(graceMs: number): Promise<void> {
    clearInterval(this.holdTimer);
    await this.handBack(this.buffer.splice(0));
    const inFlight = [...this.held.values()].map((a) => a.done);
    if (inFlight.length > 0) {
      this.options.log.info({ inFlight: inFlight.length, graceMs }, 'worker draining');
      await Promise.race([Promise.all(inFlight), new Promise((r) => setTimeout(r, graceMs).unref())]);
    }
    const left = [...this.held.values()];
    if (left.length > 0) {
      for (const a of left) a.controller.abort(new ExecutionReleasedError(a.lease.id));
      const released = await this.options.backend.release(left.map((a) => a.lease)).catch((err: Error) => {
        this.options.log.error({ err: err.message }, 'release failed; leases will expire instead');
        return new Set<string>();
      });
      this.options.log.info({ released: released.size }, 'worker released executions');
    }
  }
}
