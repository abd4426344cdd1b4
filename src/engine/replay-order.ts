import type { ReplayRecord } from '../store/steps';

/**
 * Gives a replayed handler its recorded outcomes in the order they first happened, not in call
 * order: in `Promise.race([wait, sleep])` the branch that fired first on the first run wins every
 * replay, even once both are over. Each operation that ended in the history (completed, failed or
 * closed) gets a rank by when it ended; an outcome is handed over only once every lower rank has
 * been. Code that awaits its operations one by one calls them in rank order, so it never waits here.
 *
 * An outcome called ahead of its turn is queued; queued ones are released one per macrotask (after
 * the microtasks the previous one set off), so the handler has reached whatever it would call next.
 * A rank whose operation the handler does not call by then is skipped, so a replay never stalls.
 */
export class ReplayOrder {
  private readonly ranks = new Map<number, number>();
  private readonly queued = new Map<number, () => void>();
  private nextRank = 0;
  private releaseScheduled = false;

  constructor(history: readonly ReplayRecord[]) {
    const ended = history.filter((r) => r.kind !== 'patch' && r.endedAt !== null && (r.completed || r.outcome !== null));
    ended.sort((a, b) => (a.endedAt as number) - (b.endedAt as number) || a.seq - b.seq);
    ended.forEach((r, rank) => this.ranks.set(r.seq, rank));
  }

  /**
   * Undefined when the outcome at `seq` may be handed over now (its turn, or not ranked); else a
   * promise that settles at its turn.
   */
  turn(seq: number): Promise<void> | undefined {
    const rank = this.ranks.get(seq);
    if (rank === undefined || rank < this.nextRank) return undefined;
    if (rank === this.nextRank) {
      // Its turn now; a queued later rank follows at the release already scheduled.
      this.nextRank += 1;
      return undefined;
    }
    return new Promise<void>((resolve) => {
      this.queued.set(rank, resolve);
      this.scheduleRelease();
    });
  }

  private scheduleRelease(): void {
    if (this.releaseScheduled) return;
    this.releaseScheduled = true;
    setImmediate(() => {
      this.releaseScheduled = false;
      if (this.queued.size === 0) return;
      // The next rank if it was called, else (it was not, by now) the lowest that was.
      const rank = this.queued.has(this.nextRank) ? this.nextRank : Math.min(...this.queued.keys());
      const release = this.queued.get(rank) as () => void;
      this.queued.delete(rank);
      this.nextRank = rank + 1;
      release();
      if (this.queued.size > 0) this.scheduleRelease();
    });
  }
}
