import { hostname } from 'node:os';
import type { Logger } from '../logger';
import type { TaskRegistration } from '../store/tasks';
import type { WorkerBackend } from './worker-backend';
import { DEFAULT_PRESENCE, type WorkerOptions } from './worker-options';

/** The version of this package, which a worker reports: the same file from src/ and from dist/. */
const PACKAGE_VERSION = (require('../../package.json') as { version: string }).version;

/**
 * Forgetting long-lost workers runs on one heartbeat in this many (a minute apart at the default
 * interval): lost rows are kept an hour by default, so sweeping on every beat would only repeat a
 * statement that finds nothing.
 */
const FORGET_EVERY_BEATS = 12;

/** The heartbeat interval and thresholds a worker's options ask for, defaults filled in. */
export function presenceTimings(options: Pick<WorkerOptions, 'heartbeatIntervalMs' | 'lostAfterMs' | 'forgetLostAfterMs'>) {
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? DEFAULT_PRESENCE.heartbeatIntervalMs;
  const lostAfterMs = options.lostAfterMs ?? heartbeatIntervalMs * DEFAULT_PRESENCE.missedBeats;
  // A threshold within one interval would report a healthy worker lost between two of its beats.
  if (lostAfterMs <= heartbeatIntervalMs) throw new RangeError(`lostAfterMs (${lostAfterMs}) must exceed heartbeatIntervalMs (${heartbeatIntervalMs})`);
  return { heartbeatIntervalMs, lostAfterMs, forgetLostAfterMs: options.forgetLostAfterMs ?? DEFAULT_PRESENCE.forgetLostAfterMs };
}

export interface WorkerPresenceOptions {
  backend: WorkerBackend;
  log: Logger;
  workerId: string;
  /** The tasks it serves, each with its version ('' for none). */
  tasks: ReadonlyArray<{ name: string; version: string }>;
  concurrency: number;
  /** Handlers running now; read at every heartbeat. */
  running: () => number;
  heartbeatIntervalMs: number;
  lostAfterMs: number;
  forgetLostAfterMs: number;
  onDatabaseError?: () => void;
  /** Told at every heartbeat which of its tasks the worker starts new executions of (startingTasks). */
  onStarting?: (starting: Set<string>) => void;
}

/**
 * A worker's row in the registry (`stepwise.workers`): registered at start, refreshed by a heartbeat
 * (one UPDATE of its own row) every `heartbeatIntervalMs`, marked `stopping` when shutdown begins and
 * deleted when the worker stopped. Readers call it `lost` after `lostAfterMs` of silence. Now and then
 * a heartbeat also deletes the rows of workers lost for longer than `forgetLostAfterMs`.
 *
 * Only start() may fail; every later write is best effort (logged): the registry informs operators,
 * and an outage must neither stop a worker nor fail its shutdown.
 */
export class WorkerPresence {
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  /** Set once shutdown began: a heartbeat that finds its row gone then registers no new one. */
  private leaving = false;
  private startedAt: Date | undefined;
  /** Starts at a random count, so that workers started together do not sweep on the same beat. */
  private beats = Math.floor(Math.random() * FORGET_EVERY_BEATS);
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: WorkerPresenceOptions) {}

  /**
   * Registers the worker and then `tasks` (this may throw: the worker then does not start), then
   * heartbeats. Returns the tasks whose keys the registration changed (see rekeyExecutions).
   */
  async start(tasks: readonly TaskRegistration[]): Promise<string[]> {
    const registered = await this.options.backend.register(this.registration(), tasks);
    this.startedAt = registered.startedAt;
    this.timer = setInterval(() => {
      // A heartbeat still waiting for the database is not joined by another.
      this.beating ??= this.beat().finally(() => (this.beating = undefined));
    }, this.options.heartbeatIntervalMs);
    this.timer.unref();
    return registered.rekeyed;
  }

  /** Marks the worker `stopping`; heartbeats go on until stop(), so a long drain is not reported lost. */
  markStopping(): Promise<void> {
    this.leaving = true;
    this.stopping ??= this.bestEffort('stopping', () => this.options.backend.markStopping(this.options.workerId, this.options.running()));
    return this.stopping;
  }

  /** Stops the heartbeat and deletes the worker's row, after any heartbeat or mark still in flight. */
  async stop(): Promise<void> {
    this.leaving = true;
    clearInterval(this.timer);
    await Promise.all([this.beating, this.stopping]);
    if (this.startedAt === undefined) return;
    await this.bestEffort('deregistration', () => this.options.backend.deregister(this.options.workerId));
  }

  private registration() {
    const { workerId, tasks, concurrency, lostAfterMs } = this.options;
    const names = tasks.map((t) => t.name).sort();
    const taskVersions = Object.fromEntries(tasks.map((t) => [t.name, t.version]));
    return { id: workerId, hostname: hostname(), pid: process.pid, version: PACKAGE_VERSION, tasks: names, taskVersions, concurrency, running: this.options.running(), lostAfterMs, startedAt: this.startedAt };
  }

  private async beat(): Promise<void> {
    const { backend, workerId, forgetLostAfterMs, log } = this.options;
    await this.bestEffort('heartbeat', async () => {
      const { onStarting, tasks } = this.options;
      const beat = await backend.heartbeat(workerId, this.options.running(), onStarting ? tasks : undefined);
      if (onStarting && beat.starting) onStarting(beat.starting);
      // Forgotten while cut off for longer than the loss and forget thresholds: register again, as
      // the same worker since the same start.
      if (!beat.found && !this.leaving) {
        await backend.register(this.registration(), []);
        log.info({ workerId }, 'worker registered again after its row was forgotten');
      }
    });
    if (++this.beats % FORGET_EVERY_BEATS !== 0 || this.leaving) return;
    await this.bestEffort('forgetting lost workers', async () => {
      const forgotten = await backend.forgetLostWorkers(forgetLostAfterMs);
      if (forgotten > 0) log.info({ workers: forgotten }, 'forgot lost workers');
    });
  }

  private async bestEffort(what: string, write: () => Promise<void>): Promise<void> {
    try {
      await write();
    } catch (err) {
      this.options.onDatabaseError?.();
      const level = this.options.backend.isUnavailable(err) ? 'warn' : 'error';
      this.options.log[level]({ err: (err as Error).message, workerId: this.options.workerId }, `worker ${what} failed`);
    }
  }
}
