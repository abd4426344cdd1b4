import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { Logger } from '../logger';

export interface ListenerOptions {
  url: string;
  channels: readonly string[];
  log: Logger;
  /** First reconnect delay; doubles up to maxBackoffMs, with jitter. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

/**
 * One dedicated LISTEN connection per process, reconnecting with jittered exponential backoff.
 * Emits 'notification' (channel, payload) and 'connected' after every (re)connect: since
 * notifications sent while disconnected are lost, listeners re-check their state on 'connected'.
 */
export class NotificationListener extends EventEmitter {
  private client: pg.Client | undefined;
  private stopped = false;
  private attempt = 0;
  private timer: NodeJS.Timeout | undefined;
  private connectedFlag = false;

  constructor(private readonly options: ListenerOptions) {
    super();
  }

  get isConnected(): boolean {
    return this.connectedFlag;
  }

  /**
   * Runs `text` on this connection, for statements that must not wait for a pool connection (a
   * worker's progress announcements); a failure rolls back what it left open. Rejects while the
   * connection is down: what it would have sent is the caller's to drop.
   */
  async run(text: string): Promise<void> {
    const client = this.client;
    if (!client) throw new Error('the listen connection is down');
    try {
      await client.query(text);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  /** Connects; resolves after the first successful LISTEN, or rejects if the first try fails. */
  async start(): Promise<void> {
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    this.connectedFlag = false;
    if (client) await client.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.options.url, application_name: 'stepwise-listener', connectionTimeoutMillis: 5000, keepAlive: true });
    client.on('notification', (msg) => this.emit('notification', msg.channel, msg.payload ?? ''));
    client.on('error', (err) => this.handleLoss(client, err));
    client.on('end', () => this.handleLoss(client, undefined));
    try {
      await client.connect();
      await client.query(this.options.channels.map((c) => `LISTEN ${pg.escapeIdentifier(c)}`).join('; '));
    } catch (err) {
      client.removeAllListeners('end');
      client.removeAllListeners('error');
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.attempt = 0;
    this.connectedFlag = true;
    this.emit('connected');
  }

  private handleLoss(client: pg.Client, err: Error | undefined): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.connectedFlag = false;
    client.removeAllListeners('end');
    client.on('error', () => undefined);
    if (this.stopped) return;
    this.options.log.warn({ err: err?.message }, 'listen connection lost');
    this.emit('disconnected');
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    const min = this.options.minBackoffMs ?? 100;
    const max = this.options.maxBackoffMs ?? 5000;
    const base = Math.min(max, min * 2 ** this.attempt);
    const delay = base / 2 + Math.random() * (base / 2);
    this.attempt += 1;
    this.timer = setTimeout(() => {
      this.connect().catch((err: Error) => {
        this.options.log.warn({ err: err.message, attempt: this.attempt }, 'listen reconnect failed');
        this.scheduleReconnect();
      });
    }, delay);
    this.timer.unref();
  }
}
