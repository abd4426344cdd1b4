import type { ReplayRecord } from '../store/steps';
import type { Wait } from '../store/transitions/suspend';
import { WaitSupersededError } from './errors';

/**
 * When a suspended execution comes due: `wakeAt` on the database's clock (null: only an event or a
 * child wakes it), `wakeLocally` the same instant on this process's clock, never before it.
 */
export interface SuspendedUntil {
  wakeAt: Date | null;
  wakeLocally: number | null;
}

/** A registered wait, with how to finish the promise the handler awaits when it is over. */
export interface BlockedWait {
  wait: Wait;
  /** Turns the recorded operation, once over, into what the handler's promise settles with. */
  finish(record: ReplayRecord): unknown;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/**
 * Decides when a handler is blocked on durable waits only, and then suspends its execution once for
 * all of them. A sleep, an event wait or a child wait does not suspend on the spot: it registers and
 * returns a promise that stays pending. Once nothing is in flight (no step running or being
 * recorded, no child being started) and the handler has not returned, the handler can only be
 * waiting for what registered, so every registered wait is recorded in one suspension and the worker
 * slot is freed. Registering several waits before that moment (Promise.all, Promise.race) suspends
 * on all of them, so their timers run together.
 *
 * "Nothing in flight" is judged after the microtasks queued so far have run (setImmediate), so a
 * handler that goes on synchronously, or through resolved promises, registers all it will first. A
 * handler that awaits something other than a durable operation while a wait is registered is
 * suspended under it: code outside steps must only await ctx's operations.
 *
 * The pending promises stay settleable: a worker that resumes the same execution in the same process
 * settles them from the history (see DurableContext.resume) instead of replaying the handler.
 */
/** Who hears that a run's execution suspended (see Suspension.onSuspended). */
export interface SuspensionListener {
  suspended(until: SuspendedUntil): void;
  failed(err: unknown): void;
}

export class Suspension {
  private inFlight = 0;
  private blocked: BlockedWait[] = [];
  private checkScheduled = false;
  private superseded: Wait[] | undefined;
  private idlers: Array<() => void> | undefined;
  private state: 'open' | 'suspending' | 'suspended' | 'closed' = 'open';
  /** Told when the execution has suspended, or could not; one listener per run (see onSuspended). */
  private listener: SuspensionListener | undefined;
  private unheard: { until: SuspendedUntil } | { err: unknown } | undefined;

  constructor(private readonly suspend: (waits: readonly Wait[]) => Promise<SuspendedUntil>) {}

  /**
   * Tells `listener` once the execution has suspended (with when it is due), or could not; a resume
   * (reopen) sets the next run's listener. A callback, not a promise: most runs never suspend, and a
   * promise per run is an allocation every execution would pay for.
   */
  onSuspended(listener: SuspensionListener): void {
    this.listener = listener;
    const outcome = this.unheard;
    this.unheard = undefined;
    if (outcome) this.tell(outcome);
  }

  /** Tells the listener, or keeps the outcome for the one yet to come. */
  private tell(outcome: { until: SuspendedUntil } | { err: unknown }): void {
    if (!this.listener) this.unheard = outcome;
    else if ('until' in outcome) this.listener.suspended(outcome.until);
    else this.listener.failed(outcome.err);
  }

  /** Runs `work` (a step, a child start) as in flight: no suspension begins until it settles. */
  async track<T>(work: () => Promise<T>): Promise<T> {
    this.inFlight += 1;
    try {
      return await work();
    } finally {
      this.inFlight -= 1;
      if (this.inFlight === 0 && this.idlers) for (const idle of this.idlers.splice(0)) idle();
      this.poke();
    }
  }

  /**
   * Registers a wait and returns the promise the handler awaits; the execution suspends on it. A new
   * wait for an event closes the older open wait for the same event (it lost a race, or was left
   * behind in a loop): that one rejects with WaitSupersededError, and deliveries reach the new one.
   */
  block<T>(wait: Wait, finish: (record: ReplayRecord) => T | Promise<T>): Promise<T> {
    if (wait.kind === 'event') {
      for (const older of this.blocked.filter((b) => b.wait.kind === 'event' && b.wait.eventName === wait.eventName)) {
        this.blocked.splice(this.blocked.indexOf(older), 1);
        (this.superseded ??= []).push(older.wait);
        older.reject(new WaitSupersededError(wait.eventName as string, older.wait.name, wait.name));
      }
    }
    return new Promise<T>((resolve, reject) => {
      this.blocked.push({ wait, finish, resolve: resolve as (v: unknown) => void, reject });
      this.poke();
    });
  }

  /** Event waits closed since the last suspension (see block): the next one records them closed. */
  takeSuperseded(): Wait[] {
    const taken = this.superseded ?? [];
    this.superseded = undefined;
    return taken;
  }

  /** The waits the handler left open when it ended: their rows are closed with the execution's end. */
  get abandoned(): readonly Wait[] {
    return this.blocked.map((b) => b.wait);
  }

  /** True when nothing is in flight and no wait is registered: the handler left nothing behind. */
  get settled(): boolean {
    return this.inFlight === 0 && this.blocked.length === 0;
  }

  /** Settles once nothing is in flight: a step that the handler left running has been recorded. */
  idle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => (this.idlers ??= []).push(resolve));
  }

  /** The handler returned or threw, or the execution was stopped: no suspension from now on. */
  close(): void {
    if (this.state === 'open') this.state = 'closed';
  }

  /** The waits a suspension recorded, still pending; empty unless suspended. */
  get pending(): readonly BlockedWait[] {
    return this.state === 'suspended' ? this.blocked : [];
  }

  /**
   * Reopens a suspended execution that this process resumes: each wait in `finished` is settled with
   * its recorded outcome (the handler goes on from there), and the others stay registered, so the next
   * suspension, if any, records them again.
   */
  reopen(finished: ReadonlyMap<number, ReplayRecord>): void {
    this.state = 'open';
    this.listener = undefined;
    const still = this.blocked.filter((b) => !finished.has(b.wait.seq));
    // In the order they ended, as a replay would settle them (see ReplayOrder); just now last.
    const ended = (b: BlockedWait) => (finished.get(b.wait.seq) as ReplayRecord).endedAt ?? Number.POSITIVE_INFINITY;
    const over = this.blocked.filter((b) => finished.has(b.wait.seq)).sort((a, b) => ended(a) - ended(b) || a.wait.seq - b.wait.seq);
    for (const b of over) {
      try {
        b.resolve(b.finish(finished.get(b.wait.seq) as ReplayRecord));
      } catch (err) {
        b.reject(err);
      }
    }
    this.blocked = still;
    this.poke();
  }

  private poke(): void {
    if (this.checkScheduled || this.state !== 'open' || this.blocked.length === 0) return;
    this.checkScheduled = true;
    setImmediate(() => {
      this.checkScheduled = false;
      if (this.state !== 'open' || this.inFlight > 0 || this.blocked.length === 0) return;
      this.state = 'suspending';
      this.suspend(this.blocked.map((b) => b.wait)).then(
        (until) => {
          this.state = 'suspended';
          this.tell({ until });
        },
        (err: unknown) => {
          this.state = 'closed';
          this.tell({ err });
        },
      );
    });
  }
}
