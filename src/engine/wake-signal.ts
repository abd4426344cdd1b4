import { WakeSchedule } from './wake-schedule';

/**
 * Polls that find nothing, with nothing announced meanwhile, space out up to this many poll
 * intervals: work that comes due is announced (a NOTIFY, or a timer the process set), so an idle
 * poll only guards against what was not (a process gone, a lost notification).
 */
export const IDLE_POLL_STRETCH = 4;

/**
 * What the worker loop waits on between claims: a delay that any wake-up cuts short (a NOTIFY of
 * work, a freed slot, a pause coming due: see WakeSchedule). A NOTIFY is only a latency hint; the
 * delay, the poll interval, keeps the worker correct without one.
 *
 * A freed slot is a reason to claim only while the queue may hold due work. Once a claim came back
 * short with no wake-up since, it is known to be empty, and freed slots stay quiet until work is
 * announced, a pause comes due or the poll interval passes: an idle worker sends one claim per
 * execution, not one after each handler returns and another after each completion.
 */
export class WakeSignal {
  private requested = false;
  private wakeUp: (() => void) | undefined;
  /** Wake-ups of pauses coming due: one timer, for the earliest. */
  private readonly schedule = new WakeSchedule(() => this.wake());
  /** Counts wake-ups for work, so a claim can tell whether any came while it ran. */
  private wakes = 0;
  private empty = false;

  /** Work may be due: wakes the loop, and the queue is no longer known to be empty. */
  wake(): void {
    this.wakes += 1;
    this.empty = false;
    this.requested = true;
    this.wakeUp?.();
  }

  /** A slot freed: wakes the loop unless the queue is known to be empty. */
  wakeForRoom(): void {
    if (this.empty) return;
    this.requested = true;
    this.wakeUp?.();
  }

  /** Taken before a claim is sent, for queueEmpty. */
  get epoch(): number {
    return this.wakes;
  }

  /** True when a claim came back short and nothing woke the loop for work since. */
  get queueKnownEmpty(): boolean {
    return this.empty;
  }

  /** A claim sent at `epoch` came back short: the queue is empty, unless work was announced since. */
  queueEmpty(epoch: number): void {
    if (epoch === this.wakes) this.empty = true;
  }

  /** Forgets the wake-ups so far: the claim about to be sent sees whatever they announced. */
  reset(): void {
    this.requested = false;
  }

  /** Waits for a wake-up or `ms`, whichever comes first; returns at once when one is pending. */
  async wait(ms: number): Promise<void> {
    if (this.requested) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wakeUp = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wakeUp = undefined;
  }

  /**
   * Wakes at `at` (this process's clock): a paused execution comes due then, and waiting for the next
   * poll would wake it up to a poll interval late.
   */
  wakeAt(at: number): void {
    this.schedule.add(at);
  }

  /** Cancels the timed wake-ups still pending. */
  clearTimers(): void {
    this.schedule.stop();
  }
}
