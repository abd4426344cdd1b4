import { nextFireAfter, type CronSchedule } from '../domain/cron';
import { CRON_KEY_PREFIX } from '../domain/keys';
import type { Db } from '../store/db';
import { insertExecutions } from '../store/executions';
import type { Logger } from '../logger';
import { retryWhileUnavailable } from './db-retry';
import type { CronFire } from './worker-backend';

/** A timer never waits longer than this, so a clock that jumps (or a suspended VM) is noticed soon. */
const MAX_TIMER_MS = 60_000;

/** Idempotency keys with this prefix are the cron schedules' own: clients may not use them. */

/** The idempotency key of the execution a fire time starts: the same in every worker. */
export function cronKey(task: string, fireAt: Date): string {
  return `${CRON_KEY_PREFIX}${task}:${fireAt.toISOString()}`;
}

export interface CronFirerOptions {
  /** Where fire times are scheduled: this database, unless `fire` is given. */
  db?: Db;
  /** Schedules a fire time (the worker's port: see WorkerBackend.fireCron); by default, an insert into `db`. */
  fire?: (task: string, data: unknown, fireAt: Date) => Promise<CronFire>;
  log: Logger;
  schedules: ReadonlyArray<{ task: string; schedule: CronSchedule }>;
  /** Called after each fire time was recorded (created: false when another worker had already). */
  onFired?(task: string, fireAt: Date, created: boolean): void;
  /** The clock, for tests. */
  now?: () => number;
}

/**
 * Starts the executions of tasks that declared a `cron` schedule. Every worker serving such a task
 * runs one of these, with no leader and no extra table: at each fire time every one of them schedules
 * the execution under the idempotency key `cron:<task>:<fire time>`, and the unique index lets exactly
 * one of those inserts create it. Its `start_at` is the fire time.
 *
 * A fire time is computed from the pattern, never read off a worker's clock, so workers whose clocks
 * differ still agree on the key. Fire times that pass while no worker serves the task are skipped. A
 * timer that fires late (a busy event loop, a suspended machine) still fires the time it waited for,
 * then goes on from the next one after now. When the database is unreachable, a fire is retried until
 * the next fire time is due, then given up with a warning.
 */
export class CronFirer {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly inFlight = new Set<Promise<void>>();
  /** Set by stop(): no more timers, and a fire's retries end. */
  private readonly stopping = { aborted: false };
  private readonly now: () => number;

  constructor(private readonly options: CronFirerOptions) {
    this.now = options.now ?? Date.now;
  }

  start(): void {
    for (const { task, schedule } of this.options.schedules) this.arm(task, schedule, nextFireAfter(schedule, new Date(this.now())));
  }

  /** Stops firing; resolves once fires under way have landed (or failed). */
  async stop(): Promise<void> {
    this.stopping.aborted = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    await Promise.all([...this.inFlight]);
  }

  private arm(task: string, schedule: CronSchedule, fireAt: Date | null): void {
    if (this.stopping.aborted || fireAt === null) return;
    const wait = Math.min(MAX_TIMER_MS, Math.max(0, fireAt.getTime() - this.now()));
    this.timers.set(
      task,
      setTimeout(() => {
        const now = this.now();
        if (now < fireAt.getTime()) return this.arm(task, schedule, fireAt);
        const firing = this.fire(task, schedule, fireAt).finally(() => this.inFlight.delete(firing));
        this.inFlight.add(firing);
        // The next fire time after this one, or after now when this one came late.
        this.arm(task, schedule, nextFireAfter(schedule, new Date(Math.max(now, fireAt.getTime()))));
      }, wait),
    );
  }

  /** Schedules the execution of one fire time, under its key. */
  private async schedule(task: string, data: unknown, fireAt: Date): Promise<CronFire> {
    if (this.options.fire) return this.options.fire(task, data, fireAt);
    if (!this.options.db) throw new TypeError('a cron firer needs db or fire');
    const [result] = await insertExecutions(this.options.db, [{ task, data, idempotencyKey: cronKey(task, fireAt), startAt: fireAt }]);
    return { created: result.created, executionId: result.execution.id, task: result.execution.task };
  }

  private async fire(task: string, schedule: CronSchedule, fireAt: Date): Promise<void> {
    const next = nextFireAfter(schedule, fireAt);
    const deadline = next ? next.getTime() : this.now() + MAX_TIMER_MS;
    try {
      const result = await retryWhileUnavailable(() => this.schedule(task, schedule.data, fireAt), deadline, this.stopping);
      this.options.onFired?.(task, fireAt, result.created);
      if (result.created) this.options.log.info({ task, fireAt: fireAt.toISOString(), executionId: result.executionId }, 'cron fired');
      else if (result.task !== task) {
        this.options.log.warn({ task, fireAt: fireAt.toISOString(), executionId: result.executionId, heldBy: result.task }, 'cron fire time skipped: its key is held by an execution of another task');
      }
    } catch (err) {
      this.options.log.warn({ task, fireAt: fireAt.toISOString(), err: (err as Error).message }, 'cron fire time skipped: could not schedule it before the next one');
    }
  }
}
