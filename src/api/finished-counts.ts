import type { Logger } from '../logger';
import type { StatusCount } from '../store/tasks';

export interface FinishedCountsOptions {
  /** Reads the counts (countFinishedExecutions). */
  load: () => Promise<StatusCount[]>;
  log: Logger;
  /** While a count takes less than this (default 50 ms), every request reads its own, exact count. */
  exactBelowMs?: number;
  /** Past that, a count is reused for at least this long (default 2 s)... */
  minAgeMs?: number;
  /** ...and for `costFactor` times as long as it took, so recounting takes at most 1/costFactor of one connection's time (default 20)... */
  costFactor?: number;
  /** ...but never longer than this (default 5 min). */
  maxAgeMs?: number;
  now?: () => number;
}

/**
 * The finished-execution counts of `GET /tasks`. Counting reads every finished row the retention
 * period keeps, so its cost grows with the history. While it is cheap, every request counts for
 * itself and the counts are exact. Once a count takes longer than `exactBelowMs`, requests get the
 * last count at once, and the first one that finds it older than its reuse period starts one recount
 * in the background; the period grows with the time a count takes, so dashboards polling a table of
 * millions of finished rows cost the database a bounded share of its time however many are open.
 * Active counts are not kept here: they are cheap and read exactly on every request.
 */
export class FinishedCounts {
  private value: { counts: StatusCount[]; readAt: number; tookMs: number } | undefined;
  private reading: Promise<StatusCount[]> | undefined;
  private readonly exactBelowMs: number;
  private readonly minAgeMs: number;
  private readonly costFactor: number;
  private readonly maxAgeMs: number;
  private readonly now: () => number;

  constructor(private readonly options: FinishedCountsOptions) {
    this.exactBelowMs = options.exactBelowMs ?? 50;
    this.minAgeMs = options.minAgeMs ?? 2000;
    this.costFactor = options.costFactor ?? 20;
    this.maxAgeMs = options.maxAgeMs ?? 300_000;
    this.now = options.now ?? Date.now;
  }

  async get(): Promise<StatusCount[]> {
    const value = this.value;
    // Cheap: a count of its own, never one that started before this request (it could miss the
    // request's own last change).
    if (!value || value.tookMs < this.exactBelowMs) return this.read();
    const reuseMs = Math.min(this.maxAgeMs, Math.max(this.minAgeMs, value.tookMs * this.costFactor));
    if (this.now() - value.readAt >= reuseMs && !this.reading) {
      this.reading = this.read().finally(() => (this.reading = undefined));
      this.reading.catch((err: Error) => this.options.log.warn({ err: err.message }, 'recounting finished executions failed; serving the last count'));
    }
    return value.counts;
  }

  /** The background recount in progress, if any (for tests and shutdown). */
  get pending(): Promise<StatusCount[]> | undefined {
    return this.reading;
  }

  private async read(): Promise<StatusCount[]> {
    const started = this.now();
    const counts = await this.options.load();
    const readAt = this.now();
    // A slower count that started earlier must not replace a newer one.
    if (!this.value || started >= this.value.readAt - this.value.tookMs) this.value = { counts, readAt, tookMs: readAt - started };
    return counts;
  }
}
