import type { EventEmitter } from 'node:events';
import type { Logger } from '../logger';
import { CHANNEL_STREAMS, STREAMS_ANNOUNCE_MS, STREAMS_ASK } from '../store/channels';
import type { Db } from '../store/db';
import { announceStreams } from '../store/progress';

export interface StreamsBeaconOptions {
  db: Db;
  log: Logger;
  /** The process's LISTEN connection, on CHANNEL_STREAMS: workers' questions. */
  listener: EventEmitter;
  /** How many execution streams this server holds now. */
  streams: () => number;
  intervalMs?: number;
}

/**
 * Tells workers that this API server holds execution streams (CHANNEL_STREAMS), so that they announce
 * steps as they are recorded: at once when a stream opens (unless said within the last interval), every
 * interval while any is open, and in answer to a worker that asks (its LISTEN connection came up).
 * Workers announce for three intervals after each, so a lost or late one costs nothing; a failed one
 * is retried by the next tick.
 */
export class StreamsBeacon {
  private lastAt = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private readonly onNotification = (channel: string, payload: string) => {
    if (channel === CHANNEL_STREAMS && payload === STREAMS_ASK && this.options.streams() > 0) this.send();
  };

  private readonly intervalMs: number;

  constructor(private readonly options: StreamsBeaconOptions) {
    this.intervalMs = options.intervalMs ?? STREAMS_ANNOUNCE_MS;
  }

  start(): void {
    this.options.listener.on('notification', this.onNotification);
    this.timer = setInterval(() => {
      if (this.options.streams() > 0) this.send();
    }, this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    this.options.listener.off('notification', this.onNotification);
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** A stream opened. */
  opened(): void {
    if (Date.now() - this.lastAt >= this.intervalMs) this.send();
  }

  private send(): void {
    this.lastAt = Date.now();
    announceStreams(this.options.db).catch((err: Error) => this.options.log.debug({ err: err.message }, 'streams announcement failed'));
  }
}
