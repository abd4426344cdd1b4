import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import pg from 'pg';
import type { Logger } from '../logger';

/** The socket under a pg client. */
const socketOf = (client: pg.Client): Socket | undefined => (client as unknown as { connection?: { stream?: Socket } }).connection?.stream;

export interface ListenerOptions {
  url: string;
  /** Channels to LISTEN on from the first connect (default none); more can be added with listen(). */
  channels?: readonly string[];
  log: Logger;
  /** First reconnect delay; doubles up to maxBackoffMs, with jitter. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** How long opening the connection may take (default 5 s, as db.connectTimeoutMs). */
  connectTimeoutMs?: number;
  /**
   * How long a statement on it may go unanswered before the connection is closed and made again
   * (default 20 s, as db.queryTimeoutMs; 0: never): a silent database would otherwise hold the
   * statement, and every announcement queued behind it, for good.
   */
  queryTimeoutMs?: number;
}

/**
 * One dedicated LISTEN connection per process, reconnecting with jittered exponential backoff.
 * Emits 'notification' (channel, payload) and 'connected' after every (re)connect: since
 * notifications sent while disconnected are lost, listeners re-check their state on 'connected'.
 *
 * A process shares one among its parts (the API server, the worker, the webhook deliverer): every
 * NOTIFY in a database wakes every listening session there, whatever its channels, and each wake is
 * a transaction in that session's backend, so a second connection would double that work. Each part
 * adds its channels with listen() and reads only its own from 'notification'.
 */
export class NotificationListener extends EventEmitter {
  private client: pg.Client | undefined;
  private stopped = false;
  private attempt = 0;
  private timer: NodeJS.Timeout | undefined;
  private connectedFlag = false;
  /** The first connect, while it runs; after it succeeds, reconnecting is the listener's own business. */
  private starting: Promise<void> | undefined;
  private started = false;
  private readonly channels: Set<string>;
  /** Channels LISTENed on the current connection. */
  private listening = new Set<string>();
  /** Statements sent on each connection and not answered yet. */
  private readonly unanswered = new WeakMap<pg.Client, { n: number }>();

  constructor(private readonly options: ListenerOptions) {
    super();
    this.channels = new Set(options.channels ?? []);
    // Each part of a process adds a listener per event: more than the default ten is no leak.
    this.setMaxListeners(50);
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
      await this.answered(client, () => client.query(text));
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  /**
   * Runs `query` on `client` while watching its socket: silence for queryTimeoutMs with a statement
   * unanswered closes the connection (the 'timeout' handler set in connect), which reconnects.
   */
  private async answered<T>(client: pg.Client, query: () => Promise<T>): Promise<T> {
    const socket = socketOf(client);
    const ms = this.options.queryTimeoutMs ?? 20000;
    const pending = this.unanswered.get(client);
    if (!socket || !pending || ms === 0) return query();
    if (pending.n++ === 0) socket.setTimeout(ms);
    try {
      return await query();
    } finally {
      if (--pending.n === 0) socket.setTimeout(0);
    }
  }

  /**
   * Connects; resolves after the first successful LISTEN, or rejects if the first try fails (a later
   * call tries again). Once connected, it resolves at once: a lost connection is reconnected by the
   * listener itself. Any part of a process may call it; the owner alone calls stop().
   */
  start(): Promise<void> {
    if (this.started || this.stopped) return Promise.resolve();
    this.starting ??= this.connect().then(
      () => {
        this.started = true;
        this.starting = undefined;
      },
      (err: unknown) => {
        this.starting = undefined;
        throw err;
      },
    );
    return this.starting;
  }

  /**
   * Adds channels: LISTENed at once when connected, and on every reconnect. A LISTEN that fails
   * means a lost connection, whose reconnect LISTENs on every channel: it is logged, not thrown.
   */
  async listen(channels: readonly string[]): Promise<void> {
    for (const c of channels) this.channels.add(c);
    if (this.client) await this.listenOn(this.client).catch((err: Error) => this.options.log.warn({ err: err.message }, 'listen failed'));
  }

  /** LISTENs on `client` the channels it does not listen on yet. */
  private async listenOn(client: pg.Client): Promise<void> {
    const missing = [...this.channels].filter((c) => !this.listening.has(c));
    if (missing.length === 0) return;
    for (const c of missing) this.listening.add(c);
    try {
      await this.answered(client, () => client.query(missing.map((c) => `LISTEN ${pg.escapeIdentifier(c)}`).join('; ')));
    } catch (err) {
      for (const c of missing) this.listening.delete(c);
      throw err;
    }
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
    const client = new pg.Client({
      connectionString: this.options.url,
      application_name: 'stepwise-listener',
      connectionTimeoutMillis: this.options.connectTimeoutMs ?? 5000,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10000,
    });
    client.on('notification', (msg) => this.emit('notification', msg.channel, msg.payload ?? ''));
    client.on('error', (err) => this.handleLoss(client, err));
    client.on('end', () => this.handleLoss(client, undefined));
    this.listening = new Set();
    const pending = { n: 0 };
    this.unanswered.set(client, pending);
    try {
      await client.connect();
      const socket = socketOf(client);
      socket?.on('timeout', () => {
        if (pending.n === 0) return;
        this.options.log.warn({ queryTimeoutMs: this.options.queryTimeoutMs ?? 20000 }, 'listen connection silent; closing it');
        socket.destroy();
      });
      await this.listenOn(client);
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
    // Channels added while this connection was being made.
    await this.listen([]);
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
