import type { EventEmitter } from 'node:events';
import { isTerminal } from '../domain/status';
import type { Logger } from '../logger';
import { CHANNEL_CHANGED } from '../store/channels';
import type { Db } from '../store/db';
import { getExecutions } from '../store/executions';
import type { ExecutionRecord } from '../store/rows';

/** Resolves with the terminal execution, or undefined on timeout, cancel or shutdown. */
export interface PendingWait {
  done: Promise<ExecutionRecord | undefined>;
  /** Stops waiting (the client went away, or the answer is already known). */
  cancel(): void;
}

interface Waiter {
  settle(execution: ExecutionRecord | undefined): void;
}

export interface ExecutionWaitersOptions {
  db: Db;
  /** The process's one LISTEN connection: 'notification'(channel, payload) and 'connected' events. */
  listener: EventEmitter;
  /** Fallback re-check of every waiter, in case a notification was lost. */
  pollIntervalMs: number;
  log: Logger;
}

/** Ids per query when re-checking every waiter: keeps each statement's array parameter modest. */
const CHECK_BATCH = 1000;

/**
 * The long-poll fan-out. All waiters of a process share one LISTEN connection on CHANNEL_CHANGED
 * (payload: comma-separated ids that reached a terminal status) and a map id -> waiters. A
 * notification costs one query for all its ids that someone waits for; a (re)connect and the
 * fallback interval re-check every waited-for id in one query per batch. Never a query per waiter per tick.
 */
export class ExecutionWaiters {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly notified = new Set<string>();
  private flushScheduled = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly onNotification = (channel: string, payload: string) => this.handleNotification(channel, payload);
  private readonly onConnected = () => void this.checkIds([...this.waiters.keys()]);

  constructor(private readonly options: ExecutionWaitersOptions) {}

  /** Subscribes to the listener and starts the fallback interval. */
  start(): void {
    this.options.listener.on('notification', this.onNotification);
    this.options.listener.on('connected', this.onConnected);
    this.timer = setInterval(() => void this.checkIds([...this.waiters.keys()]), this.options.pollIntervalMs);
    this.timer.unref();
  }

  /** Unsubscribes and releases every waiter as timed out, so long-polls answer 202 before the server closes. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.options.listener.off('notification', this.onNotification);
    this.options.listener.off('connected', this.onConnected);
    for (const set of this.waiters.values()) for (const w of set) w.settle(undefined);
    this.waiters.clear();
  }

  /** How many requests are waiting (for metrics and tests). */
  get size(): number {
    let n = 0;
    for (const set of this.waiters.values()) n += set.size;
    return n;
  }

  /**
   * Starts waiting for `id` to reach a terminal status. Register before reading the execution, so a
   * completion that lands between the read and the registration is not missed.
   */
  waitForTerminal(id: string, timeoutMs: number): PendingWait {
    let settle!: (e: ExecutionRecord | undefined) => void;
    const done = new Promise<ExecutionRecord | undefined>((resolve) => (settle = resolve));
    if (this.stopped) {
      settle(undefined);
      return { done, cancel: () => undefined };
    }
    let timer: NodeJS.Timeout | undefined;
    const waiter: Waiter = {
      settle: (execution) => {
        if (timer) clearTimeout(timer);
        this.remove(id, waiter);
        settle(execution);
      },
    };
    let set = this.waiters.get(id);
    if (!set) this.waiters.set(id, (set = new Set()));
    set.add(waiter);
    timer = setTimeout(() => waiter.settle(undefined), timeoutMs);
    return { done, cancel: () => waiter.settle(undefined) };
  }

  private remove(id: string, waiter: Waiter): void {
    const set = this.waiters.get(id);
    if (!set) return;
    set.delete(waiter);
    if (set.size === 0) this.waiters.delete(id);
  }

  /** Collects ids over one tick, so a burst of notifications costs one query. */
  private handleNotification(channel: string, payload: string): void {
    if (channel !== CHANNEL_CHANGED) return;
    for (const id of payload.split(',')) if (this.waiters.has(id)) this.notified.add(id);
    if (this.notified.size === 0 || this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      const ids = [...this.notified];
      this.notified.clear();
      void this.checkIds(ids);
    });
  }

  /** Reads the given executions and settles the waiters of those that are terminal. */
  private async checkIds(ids: string[]): Promise<void> {
    for (let i = 0; i < ids.length && !this.stopped; i += CHECK_BATCH) {
      let executions: ExecutionRecord[];
      try {
        executions = await getExecutions(this.options.db, ids.slice(i, i + CHECK_BATCH));
      } catch (err) {
        // The next notification or interval tries again; the long-polls time out meanwhile.
        this.options.log.warn({ err: (err as Error).message }, 'long-poll re-check failed');
        return;
      }
      for (const execution of executions) {
        if (!isTerminal(execution.status)) continue;
        for (const w of [...(this.waiters.get(execution.id) ?? [])]) w.settle(execution);
      }
    }
  }
}
