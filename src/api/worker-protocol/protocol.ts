import type { GroupCommitter } from '../../group-commit';
import { ProgressAnnouncer } from '../../engine/progress-announcer';
import type { Logger } from '../../logger';
import { CHANNEL_STREAMS, STREAMS_HELD } from '../../store/channels';
import type { Db } from '../../store/db';
import type { NotificationListener } from '../../store/listener';
import type { StepResult } from '../../store/steps';
import type { Completion } from '../../store/transitions/complete';
import { WorkerClaims } from './claims';
import type { components } from '../../../generated/openapi';
import type { ItemDone } from './wire';
import { createWriteBatchers, FinishedAnswers } from './writes';


export interface WorkerProtocolOptions {
  db: Db;
  log: Logger;
  listener: NotificationListener;
  /** How often waiting claims are tried when nothing announced work. */
  claimPollIntervalMs?: number;
}

/**
 * What an API server keeps for the remote workers it serves: their waiting claims (filled together),
 * the group commits their writes share, the answers of finishing writes (for repeats), and the
 * progress announcements a worker with a database would send itself.
 */
export class WorkerProtocol {
  readonly claims: WorkerClaims;
  readonly steps: GroupCommitter<StepResult, boolean>;
  readonly completions: GroupCommitter<Completion, boolean>;
  /** Answers of completions, failures and releases, for their repeats. */
  readonly finished = new FinishedAnswers<ItemDone>();
  /** Answers of suspensions, for their repeats. */
  readonly suspended = new FinishedAnswers<components['schemas']['Suspended']>();
  private readonly progress: ProgressAnnouncer;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly onNotification = (channel: string, payload: string) => {
    if (channel === CHANNEL_STREAMS && payload === STREAMS_HELD) this.progress.streamsOpen(() => []);
  };

  constructor(private readonly options: WorkerProtocolOptions) {
    const { db, log, listener } = options;
    this.claims = new WorkerClaims({ db, log, listener, pollIntervalMs: options.claimPollIntervalMs });
    ({ steps: this.steps, completions: this.completions } = createWriteBatchers(db));
    // Streams follow steps through progress notifications: for remote workers, this server sends them.
    this.progress = new ProgressAnnouncer({ run: (sql) => listener.run(sql), log });
    listener.on('notification', this.onNotification);
  }

  /** Executions that moved on within their status (steps recorded): streams hear of them. */
  progressed(ids: readonly string[]): void {
    for (const id of ids) this.progress.add(id);
  }

  /** Runs `fn` in `ms` unless the server closes first; a failure is logged. */
  later(ms: number, fn: () => Promise<unknown>): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn().catch((err: Error) => this.options.log.warn({ err: err.message }, 'worker protocol: a deferred write failed'));
    }, ms);
    timer.unref();
    this.timers.add(timer);
  }

  /** Answers the waiting claims, lets the writes in flight finish. */
  async close(): Promise<void> {
    this.options.listener.off('notification', this.onNotification);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.progress.stop();
    await this.claims.stop();
    await Promise.all([this.steps.idle(), this.completions.idle()]);
  }
}
