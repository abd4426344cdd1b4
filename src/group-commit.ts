export interface GroupCommitOptions {
  /** Flushes running at once (default 2). */
  maxInFlight?: number;
  /** Items per flush (default 500); more wait for the next. */
  maxBatch?: number;
  /**
   * Asked before each write of a batch that is not full: milliseconds to wait first, so that writes
   * submitted meanwhile join it. Default: none, every batch is written at once.
   */
  linger?: () => number;
}

/**
 * Group commit: writes requested in the same event-loop turn, or while flushes are in flight, are
 * queued and written together by the next flush, so concurrent writers share one statement and one
 * commit. A flush starts at the end of the turn (setImmediate, no timer), so an idle system writes at
 * once and a burst (32 handlers finishing together) becomes one batch, not one lone write followed by
 * the rest. Up to `maxInFlight` flushes run at once, so one slow commit does not stall the queue.
 * A `linger` may hold a batch that is not full a little longer, for writes known to be coming.
 */
export class GroupCommitter<I, R> {
  private queue: Array<{ item: I; resolve: (result: R) => void; reject: (err: unknown) => void }> = [];
  private inFlight = 0;
  private scheduled = false;
  private readonly drained = new Set<() => void>();

  private readonly maxInFlight: number;
  private readonly maxBatch: number;
  private readonly linger: () => number;

  /**
   * @param flush writes the items and returns one result per item, in order
   * @param isTransient errors for which failing the whole batch is right (the database is away); any
   *   other batch failure is retried item by item, so one bad item cannot fail those sharing its commit
   */
  constructor(
    private readonly flush: (items: I[]) => Promise<R[]>,
    private readonly isTransient: (err: unknown) => boolean = () => false,
    options: GroupCommitOptions = {},
  ) {
    this.maxInFlight = options.maxInFlight ?? 2;
    this.maxBatch = options.maxBatch ?? 500;
    this.linger = options.linger ?? (() => 0);
  }

  /** Resolves with the item's result once its batch has committed. */
  submit(item: I): Promise<R> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  /** Items submitted and not yet taken by a flush. */
  get queued(): number {
    return this.queue.length;
  }

  /** True while anything submitted is not yet written (queued, about to flush, or in flight). */
  get pending(): boolean {
    return this.queue.length > 0 || this.inFlight > 0 || this.scheduled;
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.queue.length > 0 && this.inFlight < this.maxInFlight) void this.drain();
      else this.settleIfIdle();
    });
  }

  /** Resolves when everything submitted so far is written. */
  idle(): Promise<void> {
    if (this.inFlight === 0 && this.queue.length === 0 && !this.scheduled) return Promise.resolve();
    return new Promise((resolve) => this.drained.add(resolve));
  }

  private async drain(): Promise<void> {
    this.inFlight += 1;
    try {
      while (this.queue.length > 0) {
        const wait = this.queue.length < this.maxBatch ? this.linger() : 0;
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        await this.write(this.queue.splice(0, this.maxBatch));
      }
    } finally {
      this.inFlight -= 1;
      this.settleIfIdle();
    }
  }

  private settleIfIdle(): void {
    if (this.inFlight !== 0 || this.queue.length !== 0 || this.scheduled) return;
    for (const resolve of this.drained) resolve();
    this.drained.clear();
  }

  private async write(batch: GroupCommitter<I, R>['queue']): Promise<void> {
    try {
      const results = await this.flush(batch.map((b) => b.item));
      batch.forEach((b, i) => b.resolve(results[i]));
    } catch (err) {
      if (batch.length === 1 || this.isTransient(err)) {
        for (const b of batch) b.reject(err);
        return;
      }
      for (const b of batch) {
        try {
          b.resolve((await this.flush([b.item]))[0]);
        } catch (itemErr) {
          b.reject(itemErr);
        }
      }
    }
  }
}

/** Adapts a writer that returns the keys that landed into per-item booleans. */
export function landedFlags<I, K>(write: (items: I[]) => Promise<Set<K>>, keyOf: (item: I) => K): (items: I[]) => Promise<boolean[]> {
  return async (items) => {
    const landed = await write(items);
    return items.map((i) => landed.has(keyOf(i)));
  };
}
