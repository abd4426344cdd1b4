/**
 * Group commit: writes requested while flushes are in flight are queued and written together by the
 * next flush. An idle system flushes each write at once (no added latency); a busy one shares commits.
 * Up to `maxInFlight` flushes run at once, so a slow commit does not stall the queue behind it.
 */
export class GroupCommitter<I, K> {
  private queue: Array<{ item: I; resolve: (landed: boolean) => void; reject: (err: unknown) => void }> = [];
  private inFlight = 0;
  private readonly drained = new Set<() => void>();

  constructor(
    private readonly flush: (items: I[]) => Promise<Set<K>>,
    private readonly keyOf: (item: I) => K,
    /** Errors for which a retry of the whole batch is right (the database is away), not a split. */
    private readonly isTransient: (err: unknown) => boolean = () => false,
    private readonly maxInFlight = 2,
    private readonly maxBatch = 500,
  ) {}

  /** Resolves with whether the item's write landed (false: fenced out). */
  submit(item: I): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.inFlight < this.maxInFlight) void this.drain();
    });
  }

  /** Resolves when everything submitted so far is written. */
  idle(): Promise<void> {
    if (this.inFlight === 0 && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.drained.add(resolve));
  }

  private async drain(): Promise<void> {
    this.inFlight += 1;
    try {
      while (this.queue.length > 0) await this.write(this.queue.splice(0, this.maxBatch));
    } finally {
      this.inFlight -= 1;
      if (this.inFlight === 0 && this.queue.length === 0) {
        for (const resolve of this.drained) resolve();
        this.drained.clear();
      }
    }
  }

  private async write(batch: GroupCommitter<I, K>['queue']): Promise<void> {
    try {
      const landed = await this.flush(batch.map((b) => b.item));
      for (const b of batch) b.resolve(landed.has(this.keyOf(b.item)));
    } catch (err) {
      if (batch.length === 1 || this.isTransient(err)) {
        for (const b of batch) b.reject(err);
        return;
      }
      // One bad item must not fail the others that shared its commit: write them one by one.
      for (const b of batch) {
        try {
          b.resolve((await this.flush([b.item])).has(this.keyOf(b.item)));
        } catch (itemErr) {
          b.reject(itemErr);
        }
      }
    }
  }
}
