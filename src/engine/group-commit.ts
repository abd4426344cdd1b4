/**
 * Group commit: writes requested while one flush is in flight are queued and flushed together in the
 * next one. An idle system flushes each write at once (no added latency); a busy one shares commits.
 */
export class GroupCommitter<I, K> {
  private queue: Array<{ item: I; resolve: (landed: boolean) => void; reject: (err: unknown) => void }> = [];
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly flush: (items: I[]) => Promise<Set<K>>,
    private readonly keyOf: (item: I) => K,
    /** Errors for which a retry of the whole batch is right (the database is away), not a split. */
    private readonly isTransient: (err: unknown) => boolean = () => false,
    private readonly maxBatch = 500,
  ) {}

  /** Resolves with whether the item's write landed (false: fenced out). */
  submit(item: I): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.flushing) this.flushing = this.drain().finally(() => (this.flushing = undefined));
    });
  }

  /** Resolves when everything submitted so far is written. */
  async idle(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      try {
        const landed = await this.flush(batch.map((b) => b.item));
        for (const b of batch) b.resolve(landed.has(this.keyOf(b.item)));
      } catch (err) {
        if (batch.length === 1 || this.isTransient(err)) {
          for (const b of batch) b.reject(err);
          continue;
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
}
