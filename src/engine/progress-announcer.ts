import type { Logger } from '../logger';
import { PROGRESS_WINDOW_MS } from '../store/channels';
import { askForStreams, progressAnnouncement } from '../store/progress';

/** The most often a worker announces progress: a burst of steps costs one small transaction. */
const ANNOUNCE_INTERVAL_MS = 25;

/**
 * Gathers the executions whose handlers moved on (steps recorded, sleeps ended) and announces them
 * to API servers (progressAnnouncement) at most every 25 ms, one announcement at a time, through
 * `run`: the worker's LISTEN connection, so it never takes a pool connection from the writes, and
 * nothing waits for it. Failures are dropped: a latency hint (see progressAnnouncement).
 *
 * Only streams read progress, so the announcer works only within `windowMs` of hearing that an API
 * server holds one (streamsOpen, CHANNEL_STREAMS); the worker asks (askForStreams) whenever its LISTEN
 * connection comes up. Steps recorded while the window was shut are covered when it opens again: the
 * executions running then are announced at once.
 */
export class ProgressAnnouncer {
  private readonly ids = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private sending = false;
  private lastAt = 0;
  private stopped = false;
  /** Until when progress is announced (`now()` time): shut until an API server says it holds streams. */
  private openUntil = 0;
  private readonly windowMs: number;
  private readonly now: () => number;

  constructor(private readonly options: { run: (sql: string) => Promise<void>; log: Logger; intervalMs?: number; windowMs?: number; now?: () => number }) {
    this.windowMs = options.windowMs ?? PROGRESS_WINDOW_MS;
    this.now = options.now ?? Date.now;
  }

  /** Announces `executionId` with the next batch, if some API server holds streams. */
  add(executionId: string): void {
    if (this.stopped || this.now() > this.openUntil) return;
    this.ids.add(executionId);
    this.schedule();
  }

  /** Asks API servers whether any holds streams; those that do answer (streamsOpen). */
  askForStreams(): void {
    if (this.stopped) return;
    this.options.run(askForStreams).catch((err: Error) => this.options.log.debug({ err: err.message }, 'streams question failed'));
  }

  /**
   * An API server holds streams: announce for another window. If the window had shut, `running` (the
   * executions whose handlers run now) are announced at once, since their steps since then were not.
   */
  streamsOpen(running: () => Iterable<string>): void {
    const shut = this.now() > this.openUntil;
    this.openUntil = this.now() + this.windowMs;
    if (shut) for (const id of running()) this.add(id);
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
