import type { EventEmitter } from 'node:events';
import type { Logger } from '../logger';
import { CHANNEL_CHANGED } from '../store/channels';
import type { Db } from '../store/db';
import { getExecutionStatuses, type ExecutionStatusRecord } from '../store/executions';

/** One open changes stream. */
export interface ChangeSubscriber {
  /** Only executions of this task; every task when undefined. */
  readonly task: string | undefined;
  /** An execution's status changed (read when told of it, so it may be later than the change). */
  changed(execution: ExecutionStatusRecord): void;
  /** Changes may have been missed (the LISTEN connection was re-established, a read failed): re-read. */
  sync(): void;
  /** The fan-out stopped: the server is closing. */
  stopped(): void;
}

export interface ExecutionChangesOptions {
  db: Db;
  /** The process's one LISTEN connection: 'notification'(channel, payload) and 'connected' events. */
  listener: EventEmitter;
  log: Logger;
}

/** Ids per read: keeps each statement's array parameter modest. */
const READ_BATCH = 1000;

/**
 * The fan-out of GET /executions/changes. While any such stream is open, every CHANNEL_CHANGED
 * notification's ids are read (task and status only) and told to every stream whose task filter
 * matches: one query per burst of notifications for all the streams, never one per stream. Reads run
 * one at a time, ids arriving meanwhile waiting for the next, so one execution's statuses are told in
 * the order they happened. Nothing is read while no stream is open.
 */
export class ExecutionChanges {
  private readonly subscribers = new Set<ChangeSubscriber>();
  private readonly pending = new Set<string>();
  private draining = false;
  private stopped = false;
  private readonly onNotification = (channel: string, payload: string) => this.handleNotification(channel, payload);
  private readonly onConnected = () => this.syncAll();

  constructor(private readonly options: ExecutionChangesOptions) {}

  start(): void {
    this.options.listener.on('notification', this.onNotification);
    this.options.listener.on('connected', this.onConnected);
  }

  /** Unsubscribes and tells every stream, so they end before the server closes. */
  stop(): void {
    this.stopped = true;
    this.options.listener.off('notification', this.onNotification);
    this.options.listener.off('connected', this.onConnected);
    const all = [...this.subscribers];
    this.subscribers.clear();
    this.pending.clear();
    for (const s of all) s.stopped();
  }

  /** How many changes streams are open (for metrics and tests). */
  get size(): number {
    return this.subscribers.size;
  }

  /** Follows every status change until the returned function is called; after stop(), it is told at once. */
  subscribe(subscriber: ChangeSubscriber): () => void {
    if (this.stopped) {
      subscriber.stopped();
      return () => undefined;
    }
    this.subscribers.add(subscriber);
    return () => void this.subscribers.delete(subscriber);
  }

  private syncAll(): void {
    for (const s of [...this.subscribers]) s.sync();
  }

  private handleNotification(channel: string, payload: string): void {
    if (channel !== CHANNEL_CHANGED || this.subscribers.size === 0) return;
    for (const id of payload.split(',')) if (id) this.pending.add(id);
    if (!this.draining) void this.drain();
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      // One turn's notifications together: a burst costs one read.
      await new Promise((resolve) => setImmediate(resolve));
      while (this.pending.size > 0 && !this.stopped && this.subscribers.size > 0) {
        const ids = [...this.pending].slice(0, READ_BATCH);
        for (const id of ids) this.pending.delete(id);
        let rows: ExecutionStatusRecord[];
        try {
          rows = await getExecutionStatuses(this.options.db, ids);
        } catch (err) {
          this.options.log.warn({ err: (err as Error).message, ids: ids.length }, 'changes stream read failed');
          this.syncAll();
          continue;
        }
        for (const row of rows) {
          for (const s of [...this.subscribers]) if (s.task === undefined || s.task === row.task) s.changed(row);
        }
      }
      if (this.subscribers.size === 0) this.pending.clear();
    } finally {
      this.draining = false;
    }
  }
}
