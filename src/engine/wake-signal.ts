/**
 * What the worker loop waits on between claims: a delay that any wake-up cuts short (a NOTIFY of
 * work, a freed slot, a pause coming due). A NOTIFY is only a latency hint; the delay, the poll
 * interval, keeps the worker correct without one.
 */
export class WakeSignal {
  private requested = false;
  private wakeUp: (() => void) | undefined;
  /** Wake-ups of pauses due before the next poll. */
  private readonly timers = new Set<NodeJS.Timeout>();

  wake(): void {
    this.requested = true;
    this.wakeUp?.();
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
