import ms from 'ms';
import { isDatabaseUnavailable } from '../store/db-errors';
import type { Logger } from '../logger';
import type { Db } from '../store/db';
import { deleteFinishedExecutions, deleteOldRateStarts } from '../store/retention';
import { deleteFinishedDeliveries } from '../store/webhook-deliveries';

export interface RetentionSweeperOptions {
  db: Db;
  log: Logger;
  /** Finished executions are deleted once they finished longer ago than this. */
  keepFinishedMs: number;
  /** Time between sweeps (default one minute); the first comes after a random part of it. */
  intervalMs?: number;
  /** Rows per DELETE (default 1000): each batch is its own short transaction. */
  batchSize?: number;
  /** Called with the number of executions each batch deleted. */
  onDeleted?: (count: number) => void;
  /**
   * The share of one connection's time a sweep may keep busy (default 0.05): after each batch it
   * pauses for (1 / busyShare - 1) times as long as the batch took, so a large backlog is deleted at
   * a pace that leaves the database to the executions (docs/benchmarks.md has how the share was
   * chosen). 1 sweeps without pausing.
   */
  busyShare?: number;
  now?: () => number;
}

/**
 * Deletes finished executions (completed, failed, cancelled) past the retention period, with their
 * steps, so the table holds what is active plus a bounded history; and webhook deliveries that are over
 * (delivered or failed) created before the same cutoff. Every worker process runs one;
 * their batches skip each other's rows, so more workers only share the work. A sweep deletes batch
 * after batch until one comes back short, then waits for the next interval; a database error ends the
 * sweep and the next one tries again.
 */
export class RetentionSweeper {
  private readonly intervalMs: number;
  private readonly batchSize: number;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<number> | undefined;
  private stopped = false;
  private readonly pauseFactor: number;
  private wakeFromPause: (() => void) | undefined;

  constructor(private readonly options: RetentionSweeperOptions) {
    this.intervalMs = options.intervalMs ?? 60_000;
    this.batchSize = options.batchSize ?? 1000;
    this.now = options.now ?? Date.now;
    const share = options.busyShare ?? 0.05;
    if (!(share > 0 && share <= 1)) throw new RangeError(`busyShare must be in (0, 1], not ${share}`);
    this.pauseFactor = 1 / share - 1;
  }

  start(): void {
    if (this.stopped || this.timer) return;
    // Spread out, so workers started together do not sweep in step.
    this.arm(Math.floor(Math.random() * Math.min(this.intervalMs, 10_000)));
  }

  /** Stops sweeping; resolves once a sweep in progress has finished its current batch. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.wakeFromPause?.();
    await this.sweeping;
  }

  /** One sweep now: deletes batches until none is left; resolves with how many it deleted. */
  sweep(): Promise<number> {
    this.sweeping ??= this.deleteAll().finally(() => (this.sweeping = undefined));
    return this.sweeping;
  }

  private arm(delayMs: number): void {
    this.timer = setTimeout(() => {
      void this.sweep().finally(() => {
        if (!this.stopped) this.arm(this.intervalMs);
      });
    }, delayMs);
    this.timer.unref();
  }

  /** Waits `ms`, or less if the sweeper is stopped meanwhile. */
  private pause(ms: number): Promise<void> {
    if (ms <= 0 || this.stopped) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeFromPause = done;
    }).finally(() => (this.wakeFromPause = undefined));
  }

  private async deleteAll(): Promise<number> {
    const { db, log, keepFinishedMs, onDeleted } = this.options;
    const cutoff = new Date(this.now() - keepFinishedMs);
    let total = 0;
    try {
      for (;;) {
        const started = performance.now();
        const deleted = await deleteFinishedExecutions(db, cutoff, this.batchSize);
        total += deleted;
        if (deleted > 0) onDeleted?.(deleted);
        if (deleted < this.batchSize || this.stopped) break;
        await this.pause((performance.now() - started) * this.pauseFactor);
        if (this.stopped) break;
      }
      // Webhook deliveries that are over (delivered or failed) go after the same period, from their creation.
      for (let deliveries = this.batchSize; deliveries === this.batchSize && !this.stopped; ) {
        deliveries = await deleteFinishedDeliveries(db, cutoff, this.batchSize);
      }
      // Rate-limit stamps past any period, left by tasks no longer claimed under a rate limit.
      for (let stamps = this.batchSize; stamps === this.batchSize && !this.stopped; ) {
        stamps = await deleteOldRateStarts(db, this.batchSize);
      }
    } catch (err) {
      const level = isDatabaseUnavailable(err) ? 'warn' : 'error';
      log[level]({ err: (err as Error).message, deleted: total }, 'retention sweep failed; the next one will try again');
      return total;
    }
    if (total > 0) log.info({ deleted: total, finishedBefore: cutoff.toISOString(), keepFinished: ms(keepFinishedMs, { long: true }) }, 'deleted finished executions past retention');
    return total;
  }
}
