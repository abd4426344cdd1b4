import type { EventEmitter } from 'node:events';
import { isThrottled, mayPrefetch, type FlowPolicy } from '../../domain/flow';
import { WakeSchedule } from '../../engine/wake-schedule';
import { TaskNotRegisteredError } from '../../errors';
import type { Logger } from '../../logger';
import { CHANNEL_TASKS, CHANNEL_WORK } from '../../store/channels';
import type { Db } from '../../store/db';
import { loadReplayHistories, type ReplayRecord } from '../../store/steps';
import { getTask } from '../../store/tasks';
import { claimForWorkers, type ClaimedExecution, type ClaimTask } from '../../store/transitions/claim';
import { claimThrottledExecutions } from '../../store/transitions/claim-throttled';
import { returnUnstarted } from '../../store/transitions/release';
import { startingTasks } from '../../store/versions';

/** What a remote worker's claim asks for (the ClaimRequest of openapi.yaml, defaults applied). */
export interface ClaimWish {
  workerId: string;
  tasks: ReadonlyArray<{ name: string; version: string; startsNew: boolean }>;
  max: number;
  /** Of `max`, how many the worker can start at once: limited tasks are claimed into these only. */
  slots: number;
  leaseMs: number;
  waitMs: number;
}

/** A claimed execution with its history, as the claim answers it. */
export interface Activation {
  claimed: ClaimedExecution;
  version: string;
  leaseMs: number;
  history: ReplayRecord[];
}

/** A claim's answer. */
export interface ClaimOutcome {
  activations: Activation[];
  /** How long after the request arrived the claim ran (leases count from then). */
  waitedMs: number;
  throttled: Array<{ task: string; limit: 'concurrency' | 'rate' }>;
}

/** A task a claim takes, with the version the worker runs. */
type ServedTask = Exclude<ClaimTask, string>;

interface Waiter {
  wish: ClaimWish;
  /** The task list, as one claim statement takes it. */
  tasks: ServedTask[];
  /** Claims of the same tasks and lease length share a statement. */
  group: string;
  arrivedAt: number;
  timer: NodeJS.Timeout | undefined;
  /** The client went away: claim nothing more for it. */
  gone: boolean;
  done: boolean;
  resolve(outcome: ClaimOutcome): void;
  reject(err: unknown): void;
}

/** How long a task's recorded flow control, or which version starts it, is trusted (a notification of its registration drops it sooner). */
const FLOW_TTL_MS = 5000;
/** A round that took every place offered may have left more due: the next one runs at once, this many times in a row at most. */
const MAX_ROUNDS_IN_A_ROW = 20;

export interface WorkerClaimsOptions {
  db: Db;
  log: Logger;
  /** The API server's LISTEN connection: work announced (CHANNEL_WORK), registrations (CHANNEL_TASKS). */
  listener: EventEmitter & { listen(channels: readonly string[]): Promise<void> };
  /** Claims run at least this often while workers wait, for work no notification announced. */
  pollIntervalMs?: number;
}

/**
 * The API server's claims for the remote workers that long-poll it. Waiting claims are filled
 * together: one claim statement per round for every waiter of the same tasks (claimForWorkers), each
 * worker getting at most its room. A round runs when a claim arrives (claims arriving in the same
 * turn share it), when work is announced for a task someone waits for (LISTEN on the work channel,
 * delayed starts at their time), when an execution this server suspended or retried comes due, and
 * every poll interval while anyone waits. Tasks with a concurrency or rate limit are claimed one
 * waiter at a time, within their limits (claimThrottledExecutions). An answer leaves only after the
 * claim committed; one whose client went away meanwhile hands its executions straight back.
 */
export class WorkerClaims {
  private waiters: Waiter[] = [];
  private roundScheduled = false;
  private rounding: Promise<void> | undefined;
  private again = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private listening: Promise<void> | undefined;
  private stopped = false;
  private readonly schedule = new WakeSchedule(() => this.wake());
  private readonly flows = new Map<string, { flow: FlowPolicy; at: number }>();
  /** Per task and version, whether that version starts new executions (see startingTasks). */
  private readonly starting = new Map<string, { starts: boolean; at: number }>();
  /** Per limited task, the key its last claim ended on: keys take turns (see claimThrottledExecutions). */
  private readonly cursors = new Map<string, string>();
  /**
   * Groups whose last claim came back short with no wake-up since: nothing of theirs is due, so a
   * claim arriving for one (a worker polling again) waits for the next wake-up or poll instead of
   * sending a statement that would find nothing. `wakes` counts the wake-ups, to tell.
   */
  private readonly empty = new Set<string>();
  private wakes = 0;
  private readonly pollIntervalMs: number;
  private readonly onNotification = (channel: string, payload: string) => this.heard(channel, payload);

  constructor(private readonly options: WorkerClaimsOptions) {
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    options.listener.on('notification', this.onNotification);
  }

  /** Waiting claims now. */
  get size(): number {
    return this.waiters.length;
  }

  /**
   * Claims for one worker: waits up to `wish.waitMs` for due executions. `gone` is told when the
   * client closes the request early. Throws TaskNotRegisteredError, before waiting, for a task no
   * worker registered.
   */
  async claim(wish: ClaimWish, onGone: (listener: () => void) => void): Promise<ClaimOutcome> {
    await Promise.all(wish.tasks.map((t) => this.flowOf(t.name)));
    // LISTEN on the work channel only once a remote worker claims: other servers need not wake for work.
    this.listening ??= this.options.listener.listen([CHANNEL_WORK]).catch((err: Error) => {
      this.listening = undefined;
      this.options.log.warn({ err: err.message }, 'listening for work failed; claims poll');
    });
    const tasks = wish.tasks.map((t) => ({ name: t.name, version: t.version, startsNew: t.startsNew }));
    const group = JSON.stringify([wish.leaseMs, [...tasks].sort((a, b) => (a.name < b.name ? -1 : 1))]);
    return new Promise<ClaimOutcome>((resolve, reject) => {
      const waiter: Waiter = { wish, tasks, group, arrivedAt: Date.now(), timer: undefined, gone: false, done: false, resolve, reject };
      if (this.stopped) return resolve({ activations: [], waitedMs: 0, throttled: [] });
      this.waiters.push(waiter);
      // A claim that waits not at all is answered by the round it starts.
      if (wish.waitMs > 0) waiter.timer = setTimeout(() => this.answer(waiter, [], 0, []), wish.waitMs);
      onGone(() => {
        waiter.gone = true;
        this.answer(waiter, [], 0, []);
      });
      if (!this.empty.has(group) || wish.waitMs === 0) this.scheduleRound();
      this.armPoll();
    });
  }

  /** Work may be due now (an execution released, a completion freeing a limited task's place). */
  wake(): void {
    this.wakes += 1;
    this.empty.clear();
    if (this.waiters.length > 0) this.scheduleRound();
  }

  /** An execution comes due in `ms` (one this server suspended or retried): a round then. */
  wakeIn(ms: number): void {
    if (ms <= 0) this.wake();
    else this.schedule.add(Date.now() + ms);
  }

  /** True when a waiting claim takes a task with a concurrency or rate limit (a completion may free a place). */
  get waitsOnLimits(): boolean {
    return this.waiters.some((w) => w.tasks.some((t) => isThrottled(this.flows.get(t.name)?.flow ?? NO_LIMITS)));
  }

  /** Answers every waiting claim with nothing (the server is closing) and claims no more. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.options.listener.off('notification', this.onNotification);
    this.schedule.stop();
    clearTimeout(this.pollTimer);
    for (const w of [...this.waiters]) this.answer(w, [], 0, []);
    await this.rounding;
  }

  private heard(channel: string, payload: string): void {
    if (channel === CHANNEL_TASKS) {
      this.flows.delete(payload);
      for (const key of this.starting.keys()) if (key.startsWith(`${payload}\u0000`)) this.starting.delete(key);
      return;
    }
    if (channel !== CHANNEL_WORK || this.waiters.length === 0) return;
    const at = payload.lastIndexOf('@');
    const task = at < 0 ? payload : payload.slice(0, at);
    if (task !== '' && !this.waiters.some((w) => w.tasks.some((t) => t.name === task))) return;
    if (at < 0) this.wake();
    else this.wakeIn(Number(payload.slice(at + 1)));
  }

  /** The task's flow control as registered; throws TaskNotRegisteredError for a task nobody registered. */
  private async flowOf(task: string): Promise<FlowPolicy> {
    const known = this.flows.get(task);
    if (known && Date.now() - known.at < FLOW_TTL_MS) return known.flow;
    const row = await getTask(this.options.db, task);
    if (!row) throw new TaskNotRegisteredError(task);
    this.flows.set(task, { flow: row.flow, at: Date.now() });
    return row.flow;
  }

  private armPoll(): void {
    if (this.pollTimer || this.stopped) return;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = undefined;
      if (this.waiters.length === 0) return;
      // A poll is for what nobody announced: whatever was known empty may not be any more.
      this.wake();
      this.armPoll();
    }, this.pollIntervalMs);
    this.pollTimer.unref();
  }

  private scheduleRound(): void {
    if (this.stopped) return;
    if (this.rounding) {
      this.again = true;
      return;
    }
    if (this.roundScheduled) return;
    this.roundScheduled = true;
    setImmediate(() => {
      this.roundScheduled = false;
      this.rounding = this.rounds().finally(() => (this.rounding = undefined));
    });
  }

  private async rounds(): Promise<void> {
    for (let n = 0; n < MAX_ROUNDS_IN_A_ROW && !this.stopped; n++) {
      this.again = false;
      const full = await this.round().catch((err: unknown) => {
        this.options.log.warn({ err: (err as Error).message, waiting: this.waiters.length }, 'claim for remote workers failed');
        // The claims waiting now hear of it (a 503 while the database is away); later ones try again.
        for (const w of [...this.waiters]) this.fail(w, err);
        return false;
      });
      if (!full && !this.again) return;
    }
    if (this.waiters.length > 0) this.scheduleRound();
  }

  /** One round over every waiting claim; true when some claim statement took every place offered. */
  private async round(): Promise<boolean> {
    const waiters = this.waiters.filter((w) => !w.done);
    if (waiters.length === 0) return false;
    const groups = new Map<string, Waiter[]>();
    for (const w of waiters) {
      const list = groups.get(w.group);
      if (list) list.push(w);
      else groups.set(w.group, [w]);
    }
    let full = false;
    for (const group of groups.values()) full = (await this.roundOf(group)) || full;
    return full;
  }

  /**
   * The tasks as a claim may take them now: a task whose version is no longer the current one (another
   * registered since) starts no new executions, whatever the worker, which hears of it only at its next
   * heartbeat, asked. Only ever narrows what the worker asked.
   */
  private async current(tasks: ServedTask[]): Promise<ServedTask[]> {
    const key = (t: ServedTask) => `${t.name}\u0000${t.version}`;
    const now = Date.now();
    const stale = tasks.filter((t) => t.startsNew !== false && !(now - (this.starting.get(key(t))?.at ?? -Infinity) < FLOW_TTL_MS));
    if (stale.length > 0) {
      const starts = await startingTasks(this.options.db, stale);
      for (const t of stale) this.starting.set(key(t), { starts: starts.has(t.name), at: now });
    }
    return tasks.map((t) => (t.startsNew !== false && this.starting.get(key(t))?.starts === false ? { ...t, startsNew: false } : t));
  }

  /** Claims for the waiters of one group (same tasks, same lease length). */
  private async roundOf(group: Waiter[]): Promise<boolean> {
    const { wish } = group[0];
    const epoch = this.wakes;
    const tasks = await this.current(group[0].tasks);
    const flows = await Promise.all(tasks.map((t) => this.flowOf(t.name).catch(() => NO_LIMITS)));
    const limited = tasks.filter((_, i) => isThrottled(flows[i]));
    const free = tasks.filter((_, i) => !isThrottled(flows[i]));
    const taken = new Map<Waiter, ClaimedExecution[]>(group.map((w) => [w, []]));
    const throttled = new Map<Waiter, Array<{ task: string; limit: 'concurrency' | 'rate' }>>();
    const startedAt = Date.now();
    let full = false;
    const committed: Promise<void>[] = [];
    for (const task of limited) {
      const policy = flows[tasks.indexOf(task)];
      for (const w of group) {
        const got = taken.get(w) as ClaimedExecution[];
        const room = w.wish.max - got.length;
        const runnable = Math.max(0, Math.min(room, w.wish.slots - got.length));
        const want = mayPrefetch(policy) ? room : runnable;
        if (want <= 0 || w.done) continue;
        const claim = await claimThrottledExecutions(this.options.db, task, policy, want, wish.leaseMs, w.wish.workerId, this.cursors.get(task.name) ?? '', runnable);
        this.cursors.set(task.name, claim.cursor);
        committed.push(claim.committed);
        got.push(...claim.claimed);
        if (claim.heldBy) (throttled.get(w) ?? throttled.set(w, []).get(w))?.push({ task: task.name, limit: claim.heldBy });
        if (claim.more) full = true;
        else if (claim.contended) this.wakeIn(5 + Math.random() * 20);
      }
    }
    if (free.length > 0) {
      const places: string[] = [];
      for (const w of group) {
        if (w.done) continue;
        const room = w.wish.max - (taken.get(w) as ClaimedExecution[]).length;
        for (let i = 0; i < room; i++) places.push(w.wish.workerId);
      }
      if (places.length > 0) {
        const claimed = await claimForWorkers(this.options.db, free, places, wish.leaseMs);
        if (claimed.length === places.length) full = true;
        else if (limited.length === 0 && this.wakes === epoch) this.empty.add(group[0].group);
        // A worker with two claims waiting (unusual) fills the first one first.
        for (const c of claimed) {
          const w = group.find((x) => x.wish.workerId === c.workerId && (taken.get(x) as ClaimedExecution[]).length < x.wish.max);
          if (w) (taken.get(w) as ClaimedExecution[]).push(c);
        }
      }
    }
    await Promise.all(committed);
    const all = [...taken.values()].flat();
    if (all.length === 0) return full;
    const histories = await loadReplayHistories(this.options.db, all.filter((c) => !isFresh(c)).map((c) => c.execution.id));
    for (const [w, got] of taken) {
      if (got.length === 0) continue;
      const version = (name: string) => w.tasks.find((t) => t.name === name)?.version ?? '';
      const activations = got.map((c) => ({ claimed: c, version: version(c.execution.task), leaseMs: w.wish.leaseMs, history: histories.get(c.execution.id) ?? [] }));
      this.answer(w, activations, Math.max(0, startedAt - w.arrivedAt), throttled.get(w) ?? []);
    }
    return full;
  }

  private answer(w: Waiter, activations: Activation[], waitedMs: number, throttled: ClaimOutcome['throttled']): void {
    if (w.done) {
      if (activations.length > 0) this.handBack(activations);
      return;
    }
    w.done = true;
    clearTimeout(w.timer);
    this.waiters.splice(this.waiters.indexOf(w), 1);
    // Claimed for a client that went away: nobody will run them, so they go back at once.
    if (w.gone && activations.length > 0) {
      this.handBack(activations);
      activations = [];
    }
    w.resolve({ activations, waitedMs, throttled });
  }

  private fail(w: Waiter, err: unknown): void {
    if (w.done) return;
    w.done = true;
    clearTimeout(w.timer);
    this.waiters.splice(this.waiters.indexOf(w), 1);
    w.reject(err);
  }

  private handBack(activations: Activation[]): void {
    const items = activations.map((a) => ({ id: a.claimed.execution.id, token: a.claimed.execution.leaseToken as string, previousStatus: a.claimed.previousStatus }));
    returnUnstarted(this.options.db, items).catch((err: Error) => this.options.log.warn({ err: err.message, executions: items.length }, 'could not hand back executions claimed for a worker that went away; their leases will expire instead'));
  }
}

const NO_LIMITS: FlowPolicy = { concurrency: null, rateLimit: null, debounce: null };

/** A first run of a never-started execution: it has no history to read. */
function isFresh(c: ClaimedExecution): boolean {
  return c.previousStatus === 'pending' && c.execution.attempt === 1 && c.execution.stepsCompleted === 0;
}
