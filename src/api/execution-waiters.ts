import type { EventEmitter } from 'node:events';
import { isTerminal } from '../domain/status';
import type { GroupCommitter } from '../group-commit';
import type { Logger } from '../logger';
import { CHANNEL_CHANGED, CHANNEL_PROGRESS } from '../store/channels';
import type { Db } from '../store/db';
import type { ExecutionRecord } from '../store/rows';
import { createExecutionReader } from './execution-reader';
import { TimeoutLists } from './timeout-lists';

/** Told once that a long-poll's wait ended (see PendingWait.whenDone). */
export interface WaitEnd {
  waitEnded(execution: ExecutionRecord | undefined): void;
}

/** A long-poll's wait: it ends with the terminal execution, or undefined on timeout, cancel or shutdown. */
export interface PendingWait {
  /**
   * Tells `end` when the wait ends, or at once if it has ended already; one `end` per wait. An object
   * rather than a promise: a parked long-poll is then one object here, not a promise, its reactions
   * and their closures.
   */
  whenDone(end: WaitEnd): void;
  /** The same as a promise, for callers that hold no thousands of waits (whenDone, so at most once). */
  readonly done: Promise<ExecutionRecord | undefined>;
  /** Stops waiting (the client went away, or the answer is already known). */
  cancel(): void;
}

/** One party that follows an execution through the fan-out: a long-poll or a stream. */
export interface ExecutionSubscriber {
  /** A stream follows every change (steps too, CHANNEL_PROGRESS); a long-poll only status changes. */
  readonly kind: 'long-poll' | 'stream';
  /** A read of the execution (undefined: it does not exist), in the order the reads were made. */
  offer(execution: ExecutionRecord | undefined): void;
  /** A read failed (the database is away); the next notification, reconnect or tick reads again. */
  failed(err: unknown): void;
  /** The fan-out stopped: the server is closing. */
  stopped(): void;
}

export interface ExecutionWaitersOptions {
  db: Db;
  /** The process's one LISTEN connection: 'notification'(channel, payload) and 'connected' events. */
  listener: EventEmitter;
  /** Fallback re-check of every subscriber, in case a notification was lost. */
  pollIntervalMs: number;
  log: Logger;
  /** The API's shared reader (deps.reader), so the fan-out's reads join those of GET and the long-polls; else one of its own. */
  reader?: GroupCommitter<string, ExecutionRecord | undefined>;
  /** A stream subscribed: workers are to announce progress (StreamsBeacon). */
  onStreamOpened?: () => void;
}

/**
 * The subscribers of one execution id. Most ids have one (a long-poll each on 10,000 executions), kept
 * as itself rather than in a Set of its own; a Set once a second one comes.
 */
type Followers = ExecutionSubscriber | Set<ExecutionSubscriber>;

/** A copy, so a subscriber may unsubscribe while the list is walked. */
function listOf(followers: Followers): ExecutionSubscriber[] {
  return followers instanceof Set ? [...followers] : [followers];
}

/**
 * The fan-out of long-polls and streams. All subscribers of a process share one LISTEN connection on
 * CHANNEL_CHANGED and CHANNEL_PROGRESS (payloads: comma-separated ids) and a map id -> subscribers. A
 * notification re-reads only the ids someone follows, through the group reader, so the ids named in
 * one event-loop turn cost one query (per 1,000); a (re)connect and the fallback interval re-read
 * every followed id the same way. Never a query per subscriber per tick.
 *
 * Reads of one id never overlap: an id named again while its read is in flight is read once more
 * after it. Each read starts after the previous one ended, so it sees the same state or a later one,
 * and subscribers are offered states in the order they happened (two overlapping reads could answer
 * in either order, and a stream would go back in time).
 */
export class ExecutionWaiters {
  private readonly subscribers = new Map<string, Followers>();
  private readonly notified = new Set<string>();
  private readonly reading = new Set<string>();
  private readonly readAgain = new Set<string>();
  private readonly reader: GroupCommitter<string, ExecutionRecord | undefined>;
  private flushScheduled = false;
  private timer: NodeJS.Timeout | undefined;
  /** The long-polls' timeouts: one timer per distinct timeout, not one per long-poll. */
  private readonly timeouts = new TimeoutLists<LongPoll>((poll) => poll.cancel());
  private stopped = false;
  private readonly onNotification = (channel: string, payload: string) => this.handleNotification(channel, payload);
  private readonly onConnected = () => this.refresh(this.subscribers.keys());

  constructor(private readonly options: ExecutionWaitersOptions) {
    this.reader = options.reader ?? createExecutionReader(options.db);
  }

  /** Subscribes to the listener and starts the fallback interval. */
  start(): void {
    this.options.listener.on('notification', this.onNotification);
    this.options.listener.on('connected', this.onConnected);
    this.timer = setInterval(() => this.refresh(this.subscribers.keys()), this.options.pollIntervalMs);
    this.timer.unref();
  }

  /** Unsubscribes and tells every subscriber: long-polls answer 202 and streams end before the server closes. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.options.listener.off('notification', this.onNotification);
    this.options.listener.off('connected', this.onConnected);
    const all = [...this.subscribers.values()].flatMap(listOf);
    this.subscribers.clear();
    for (const s of all) s.stopped();
  }

  /** How many long-polls are waiting (for metrics and tests). */
  get size(): number {
    return this.count('long-poll');
  }

  /** How many streams are open (for metrics and tests). */
  get streams(): number {
    return this.count('stream');
  }

  private count(kind: ExecutionSubscriber['kind']): number {
    let n = 0;
    for (const followers of this.subscribers.values()) {
      if (!(followers instanceof Set)) n += followers.kind === kind ? 1 : 0;
      else for (const s of followers) if (s.kind === kind) n += 1;
    }
    return n;
  }

  /**
   * Follows `id` until the returned function is called. With `read`, the execution is read at once
   * (after any read already in flight), so the first offer reflects every change committed before
   * the call; a change committed later is offered too, since the subscriber is already registered.
   * After stop(), the subscriber is told at once.
   */
  subscribe(id: string, subscriber: ExecutionSubscriber, options: { read: boolean }): () => void {
    if (this.stopped) {
      subscriber.stopped();
      return () => undefined;
    }
    this.add(id, subscriber);
    if (subscriber.kind === 'stream') this.options.onStreamOpened?.();
    if (options.read) this.refresh([id]);
    return () => this.remove(id, subscriber);
  }

  /**
   * Starts waiting for `id` to reach a terminal status. Register before reading the execution, so a
   * completion that lands between the read and the registration is not missed.
   */
  waitForTerminal(id: string, timeoutMs: number): PendingWait {
    const poll = new LongPoll(id, timeoutMs, this);
    if (this.stopped) poll.stopped();
    else {
      this.add(id, poll);
      this.timeouts.add(poll, timeoutMs);
    }
    return poll;
  }

  /** Takes a long-poll out of the fan-out and its timeout list; a long-poll calls it as it finishes. */
  forget(poll: LongPoll): void {
    this.timeouts.delete(poll, poll.timeoutMs);
    this.remove(poll.id, poll);
  }

  private add(id: string, subscriber: ExecutionSubscriber): void {
    const followers = this.subscribers.get(id);
    if (followers === undefined) this.subscribers.set(id, subscriber);
    else if (followers instanceof Set) followers.add(subscriber);
    else if (followers !== subscriber) this.subscribers.set(id, new Set([followers, subscriber]));
  }

  private remove(id: string, subscriber: ExecutionSubscriber): void {
    const followers = this.subscribers.get(id);
    if (followers === subscriber) this.subscribers.delete(id);
    else if (followers instanceof Set && followers.delete(subscriber) && followers.size === 0) this.subscribers.delete(id);
  }

  /** Collects ids over one tick, so a burst of notifications costs one read per id. */
  private handleNotification(channel: string, payload: string): void {
    if (channel !== CHANNEL_CHANGED && channel !== CHANNEL_PROGRESS) return;
    for (const id of payload.split(',')) {
      const followers = this.subscribers.get(id);
      if (!followers) continue;
      // Progress (a step completed) changes no status: long-polls need not read for it.
      if (channel === CHANNEL_PROGRESS && !listOf(followers).some((s) => s.kind === 'stream')) continue;
      this.notified.add(id);
    }
    if (this.notified.size === 0 || this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      const ids = [...this.notified];
      this.notified.clear();
      this.refresh(ids);
    });
  }

  /** Reads the followed ones among `ids` (an id being read is read again afterwards) and offers the results. */
  private refresh(ids: Iterable<string>): void {
    if (this.stopped) return;
    const batch: string[] = [];
    for (const id of ids) {
      if (!this.subscribers.has(id)) continue;
      if (this.reading.has(id)) this.readAgain.add(id);
      else {
        this.reading.add(id);
        batch.push(id);
      }
    }
    if (batch.length > 0) void this.read(batch);
  }

  private async read(ids: string[]): Promise<void> {
    // Submitted in one turn: the reader makes one query per 1,000 of them.
    const results = await Promise.allSettled(ids.map((id) => this.reader.submit(id)));
    let failure: unknown;
    ids.forEach((id, i) => {
      this.reading.delete(id);
      const result = results[i];
      const followers = this.subscribers.get(id);
      if (!followers) return;
      for (const s of listOf(followers)) {
        if (result.status === 'fulfilled') s.offer(result.value);
        else s.failed(result.reason);
      }
      if (result.status === 'rejected') failure ??= result.reason;
    });
    // The next notification, reconnect or interval tries again; meanwhile long-polls time out and streams send keep-alives.
    if (failure !== undefined) this.options.log.warn({ err: (failure as Error).message, ids: ids.length }, 'execution re-read failed');
    const again = ids.filter((id) => this.readAgain.delete(id));
    if (again.length > 0) this.refresh(again);
  }
}

/**
 * One long-poll's wait: a subscriber whose methods live on the prototype and whose timeout is an
 * entry in its owner's TimeoutLists, so a parked long-poll costs one object and one bound `cancel`
 * (10,000 of them are held at once), not a promise, a handful of closures and a Node timer.
 */
class LongPoll implements ExecutionSubscriber, PendingWait {
  readonly kind = 'long-poll';
  /** A function of its own: callers pass it as an event listener (the response's 'close'). */
  readonly cancel = () => this.finish(undefined);
  private settled = false;
  /** Until `end` is given: how the wait ended, if it did before. */
  private outcome: ExecutionRecord | undefined;
  private end: WaitEnd | undefined;

  constructor(
    readonly id: string,
    readonly timeoutMs: number,
    private readonly owner: ExecutionWaiters,
  ) {}

  whenDone(end: WaitEnd): void {
    if (this.end) throw new Error('a long-poll\'s wait tells one party when it ends');
    if (this.settled) end.waitEnded(this.outcome);
    else this.end = end;
  }

  get done(): Promise<ExecutionRecord | undefined> {
    return new Promise((resolve) => this.whenDone({ waitEnded: resolve }));
  }

  offer(execution: ExecutionRecord | undefined): void {
    if (execution && isTerminal(execution.status)) this.finish(execution);
  }

  /** The long-poll times out meanwhile, and then reads once more for its answer. */
  failed(): void {}

  stopped(): void {
    this.finish(undefined);
  }

  private finish(execution: ExecutionRecord | undefined): void {
    if (this.settled) return;
    this.settled = true;
    this.owner.forget(this);
    const end = this.end;
    this.end = undefined;
    if (end) end.waitEnded(execution);
    else this.outcome = execution;
  }
}
