/**
 * Events per millisecond, smoothed: an exponentially weighted average whose weight halves every
 * `halfLifeMs`, whatever the spacing of the readings, so a rate measured over a busy burst fades
 * once the events stop. Pure; the clock is passed in.
 */
export class RateMeter {
  private rate = 0;
  private count = 0;
  private since: number;

  constructor(
    private readonly halfLifeMs: number,
    private readonly now: () => number,
  ) {
    this.since = now();
  }

  record(events = 1): void {
    this.fold();
    this.count += events;
  }

  /** The smoothed rate, in events per millisecond. */
  perMs(): number {
    this.fold();
    return this.rate;
  }

  /** Folds the events counted since the last fold into the average, once a half-life has passed. */
  private fold(): void {
    const t = this.now();
    const elapsed = t - this.since;
    if (elapsed < this.halfLifeMs) return;
    const keep = 0.5 ** (elapsed / this.halfLifeMs);
    this.rate = keep * this.rate + (1 - keep) * (this.count / elapsed);
    this.count = 0;
    this.since = t;
  }
}
