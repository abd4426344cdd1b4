/**
 * What the worker loop waits on between claims: a delay that any wake-up cuts short (a NOTIFY of
 * work, a freed slot, a pause coming due). A NOTIFY is only a latency hint; the delay, the poll
 * interval, keeps the worker correct without one.
 *
 * A freed slot is a reason to claim only while the queue may hold due work. Once a claim came back
 * short with no wake-up since, it is known to be empty, and freed slots stay quiet until work is
 * announced, a pause comes due or the poll interval passes: an idle worker sends one claim per
 * execution, not one after each handler returns and another after each completion.
 */
export class WakeSignal {
  private requested = false;
  private wakeUp: (() => void) | undefined;
  /** Wake-ups of pauses due before the next poll. */
  private readonly timers = new Set<NodeJS.Timeout>();
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

  /** Wakes at `until` when it comes within `withinMs`: a pause shorter than the poll should not wait for it. */
  wakeAt(until: Date, withinMs: number): void {
    const ms = until.getTime() - Date.now();
    if (ms >= withinMs) return;
    // A little after the due time, so the claim finds the execution due by the database's clock too.
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.wake();
    }, Math.max(0, ms) + 5);
    this.timers.add(timer);
  }

  /** Cancels the timed wake-ups still pending. */
  clearTimers(): void {
    for (const t of this.timers) clearTimeout(t);
  }
}
