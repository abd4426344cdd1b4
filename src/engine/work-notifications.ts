import type { Logger } from '../logger';
import { CHANNEL_CANCEL, CHANNEL_STREAMS, CHANNEL_TASKS, CHANNEL_WORK, STREAMS_HELD } from '../store/channels';
import { NotificationListener } from '../store/listener';

/** The channels a worker listens on. */
const WORKER_CHANNELS = [CHANNEL_WORK, CHANNEL_CANCEL, CHANNEL_TASKS, CHANNEL_STREAMS] as const;

export interface WorkNotificationsOptions {
  url: string;
  /** The process's shared LISTEN connection, owned (started and stopped) by the caller; else one of its own. */
  listener?: NotificationListener;
  log: Logger;
  /** True for a task this worker serves: work announced for other tasks does not wake it. */
  serves: (task: string) => boolean;
  onWork: () => void;
  /** Work on a task this worker serves comes due in `delayMs` (a delayed start). */
  onWorkIn?: (delayMs: number) => void;
  onCancel: (executionId: string) => void;
  /** A task this worker serves was registered again (another worker started, maybe of another version). */
  onTaskRegistered?: (task: string) => void;
  /** An API server holds execution streams (CHANNEL_STREAMS). */
  onStreams?: () => void;
  /** The connection is up (at start, or again): notifications sent while it was not are lost. */
  onListening?: () => void;
}

/**
 * A worker's LISTEN connection: work announced for its tasks, cancels, registrations of its tasks, and API servers' streams. A NOTIFY is only a latency
 * hint, polling keeps the worker correct; notifications sent while disconnected are lost, so every
 * (re)connect counts as work announced.
 */
export class WorkNotifications {
  private readonly listener: NotificationListener;
  private readonly owned: boolean;
  private seq = 0;
  private readonly onNotification = (channel: string, payload: string) => this.dispatch(channel, payload);
  private readonly onConnected = () => {
    this.announceWork();
    this.options.onListening?.();
  };

  constructor(private readonly options: WorkNotificationsOptions) {
    this.owned = options.listener === undefined;
    this.listener = options.listener ?? new NotificationListener({ url: options.url, log: options.log });
    this.listener.on('notification', this.onNotification);
    this.listener.on('connected', this.onConnected);
  }

  /** Counts work announced, so a claim can tell whether some arrived while it ran. */
  get workSeq(): number {
    return this.seq;
  }

  async start(): Promise<void> {
    // Added before the connection is made (when this part is the first), so it LISTENs on them from the start.
    await this.listener.listen(WORKER_CHANNELS);
    await this.listener.start();
    // A shared connection may have been up before: no 'connected' event comes for this part.
    if (!this.owned) this.options.onListening?.();
  }

  async stop(): Promise<void> {
    this.listener.off('notification', this.onNotification);
    this.listener.off('connected', this.onConnected);
    if (this.owned) await this.listener.stop();
  }

  /** Sends statements on this connection rather than a pool's (see NotificationListener.run). */
  run(text: string): Promise<void> {
    return this.listener.run(text);
  }

  private dispatch(channel: string, payload: string): void {
    if (channel === CHANNEL_WORK) {
      const at = payload.lastIndexOf('@');
      if (at < 0) {
        if (payload === '' || this.options.serves(payload)) this.announceWork();
      } else if (this.options.serves(payload.slice(0, at))) {
        this.options.onWorkIn?.(Number(payload.slice(at + 1)));
      }
    } else if (channel === CHANNEL_CANCEL) this.options.onCancel(payload);
    else if (channel === CHANNEL_TASKS && this.options.serves(payload)) this.options.onTaskRegistered?.(payload);
    else if (channel === CHANNEL_STREAMS && payload === STREAMS_HELD) this.options.onStreams?.();
  }

  private announceWork(): void {
    this.seq += 1;
    this.options.onWork();
  }
}
