import type { Logger } from '../logger';
import { progressAnnouncement } from '../store/progress';

/** The most often a worker announces progress: a burst of steps costs one small transaction. */
const ANNOUNCE_INTERVAL_MS = 25;

/**
 * Gathers the executions whose handlers moved on (steps recorded, sleeps ended) and announces them
 * to API servers (progressAnnouncement) at most every 25 ms, one announcement at a time, through
 * `run`: the worker's LISTEN connection, so it never takes a pool connection from the writes, and
 * nothing waits for it. Failures are dropped: a latency hint (see progressAnnouncement).
 */
export class ProgressAnnouncer {
  private readonly ids = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private sending = false;
  private lastAt = 0;
  private stopped = false;

  constructor(private readonly options: { run: (sql: string) => Promise<void>; log: Logger; intervalMs?: number }) {}

  /** Announces `executionId` with the next batch. */
  add(executionId: string): void {
    if (this.stopped) return;
    this.ids.add(executionId);
    this.schedule();
  }

  /** Drops what is not yet sent: a stopping worker's last steps are found by the API's fallback re-check. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.ids.clear();
  }

  private schedule(): void {
    if (this.timer || this.sending || this.ids.size === 0 || this.stopped) return;
    const interval = this.options.intervalMs ?? ANNOUNCE_INTERVAL_MS;
    this.timer = setTimeout(() => void this.send(), Math.max(0, this.lastAt + interval - Date.now()));
    this.timer.unref();
  }

  private async send(): Promise<void> {
    this.timer = undefined;
    const ids = [...this.ids];
    this.ids.clear();
    this.sending = true;
    this.lastAt = Date.now();
    try {
      await this.options.run(progressAnnouncement(ids));
    } catch (err) {
      this.options.log.debug({ err: (err as Error).message, executions: ids.length }, 'progress announcement failed');
    } finally {
      this.sending = false;
      this.schedule();
    }
  }
}
