/**
 * An AbortController that builds its signal only when asked for one. A worker needs a way to stop
 * every execution it runs, but most handlers never read ctx.signal, and building an AbortSignal costs
 * several microseconds, a visible share of a busy worker's CPU. Aborting before the signal exists
 * hands out a signal that is already aborted, with the same reason.
 */
export class LazyAbortController {
  private controller: AbortController | undefined;
  private abortedWith: { reason: unknown } | undefined;
  private listeners: Array<(reason: unknown) => void> | undefined;

  get aborted(): boolean {
    return this.abortedWith !== undefined;
  }

  get reason(): unknown {
    return this.abortedWith?.reason;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith.reason);
    }
    return this.controller.signal;
  }

  /** The first abort wins, as with AbortController. */
  abort(reason: unknown): void {
    if (this.abortedWith) return;
    this.abortedWith = { reason };
    this.controller?.abort(reason);
    for (const listener of this.listeners ?? []) listener(reason);
    this.listeners = undefined;
  }

  /** Calls `listener` with the reason once aborted (at once if it is), without building a signal. */
  onAbort(listener: (reason: unknown) => void): void {
    if (this.abortedWith) listener(this.abortedWith.reason);
    else (this.listeners ??= []).push(listener);
  }
}
