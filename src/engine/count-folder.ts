import type { Logger } from '../logger';
import type { Db } from '../store/db';
import { isDatabaseUnavailable } from '../store/db-errors';
import { foldExecutionCounts } from '../store/execution-counts';

/** Idle folds space out up to this many intervals: few deltas can pile up before one finds them. */
const IDLE_FOLD_STRETCH = 16;

export interface CountFolderOptions {
  db: Db;
  log: Logger;
  /** Time between folds (default one second); the first comes after a random part of it. */
  intervalMs?: number;
}

/**
 * Folds the execution-count deltas into the counts (foldExecutionCounts) on an interval, so a count
 * reads the few rows written since the last fold rather than all written since the table began. Every
 * API and worker process runs one: folds never conflict, and counts stay exact whether or not any
 * process folds (a reader sums what is left), so a missed fold costs only a slower count.
 */
export class CountFolder {
  private readonly intervalMs: number;
  private idleFolds = 0;
  private timer: NodeJS.Timeout | undefined;
  private folding: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly options: CountFolderOptions) {
    this.intervalMs = options.intervalMs ?? 1000;
  }

  start(): void {
    if (this.stopped || this.timer) return;
    this.arm(Math.floor(Math.random() * this.intervalMs));
  }

  /** Stops folding; resolves once a fold in progress has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.folding;
  }

  private arm(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.folding = this.fold().then((folded) => {
        this.folding = undefined;
        // Folds that find nothing space out, so an idle process costs the database little; the first
        // that moves anything brings back the interval. Readers add the deltas, so late is still exact.
        this.idleFolds = folded === 0 ? this.idleFolds + 1 : 0;
        if (!this.stopped) this.arm(this.intervalMs * Math.min(2 ** this.idleFolds, IDLE_FOLD_STRETCH));
      });
    }, delayMs);
    this.timer.unref();
  }

  /** Folds once; the delta rows it moved (0 when it failed). */
  private async fold(): Promise<number> {
    try {
      return await foldExecutionCounts(this.options.db);
    } catch (err) {
      // The database being away is logged by whoever needs it; a fold simply waits for the next turn.
      if (!isDatabaseUnavailable(err)) this.options.log.warn({ err: (err as Error).message }, 'folding execution counts failed');
      return 0;
    }
  }
}
