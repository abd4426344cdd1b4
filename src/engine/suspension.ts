import type { Wait } from '../store/transitions/suspend';

/** Never settles: what a durable operation returns while its execution waits for it. */
const BLOCKED = new Promise<never>(() => undefined);

/**
 * Decides when a handler is blocked on durable waits only, and then suspends its execution once for
 * all of them. A sleep, an event wait or a child wait does not suspend on the spot: it registers and
 * returns a promise that never settles in this run. Once nothing is in flight (no step running or
 * being recorded, no child being started) and the handler has not returned, the handler can only be
 * waiting for what registered, so every registered wait is recorded in one suspension and the worker
 * slot is freed; a replay resumes from the history. Registering several waits before that moment
 * (Promise.all, Promise.race) suspends on all of them, so their timers run together.
 *
 * "Nothing in flight" is judged after the microtasks queued so far have run (setImmediate), so a
 * handler that goes on synchronously, or through resolved promises, registers all it will first. A
 * handler that awaits something other than a durable operation while a wait is registered is
 * suspended under it: code outside steps must only await ctx's operations.
 */
export class Suspension {
  private inFlight = 0;
  private readonly waits: Wait[] = [];
  private checkScheduled = false;
  private state: 'open' | 'suspending' | 'closed' = 'open';
  private resolveSuspended!: (wakeAt: Date | null) => void;
  private rejectSuspended!: (err: unknown) => void;
  /** Settles when the execution has suspended (with when it is due), or rejects when it could not. */
  readonly suspended: Promise<Date | null>;

  constructor(private readonly suspend: (waits: readonly Wait[]) => Promise<Date | null>) {
    this.suspended = new Promise((resolve, reject) => {
      this.resolveSuspended = resolve;
      this.rejectSuspended = reject;
    });
    // The runner races this against the handler; a rejection nobody raced must not go unhandled.
    this.suspended.catch(() => undefined);
  }

  /** Runs `work` (a step, a child start) as in flight: no suspension begins until it settles. */
  async track<T>(work: () => Promise<T>): Promise<T> {
    this.inFlight += 1;
    try {
      return await work();
    } finally {
      this.inFlight -= 1;
      this.poke();
    }
  }

  /** Registers a wait and returns a promise that never settles: the execution suspends on it. */
  block(wait: Wait): Promise<never> {
    this.waits.push(wait);
    this.poke();
    return BLOCKED;
  }

  /** The handler returned or threw, or the execution was stopped: no suspension from now on. */
  close(): void {
    if (this.state === 'open') this.state = 'closed';
  }

  private poke(): void {
    if (this.checkScheduled || this.state !== 'open' || this.waits.length === 0) return;
    this.checkScheduled = true;
    setImmediate(() => {
      this.checkScheduled = false;
      if (this.state !== 'open' || this.inFlight > 0 || this.waits.length === 0) return;
      this.state = 'suspending';
      this.suspend(this.waits).then(this.resolveSuspended, this.rejectSuspended);
    });
  }
}
