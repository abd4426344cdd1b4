import type { Static, TSchema, TUnknown } from '@sinclair/typebox';
import { checkEventName } from '../domain/event-name';
import { parseCronTrigger, type CronTrigger } from '../domain/cron';
import { parseDuration, type Duration } from '../domain/duration';
import { parseFlow, type FlowOptions } from '../domain/flow';
import { parseTaskVersion } from '../domain/version';
import type { Jsonify } from '../domain/jsonify';
import { compileJsonSchema, describeSchemaErrors } from '../domain/json-schema';
import type { RetryPolicy } from '../domain/retry';
import type { Logger } from '../logger';
import type { StepFn } from './step-attempt';
import type { StepOptions } from './step-runner';

export type { StepAttempt, StepFn } from './step-attempt';
export type { StepOptions } from './step-runner';

/** Event names a handler may wait for: the declared ones, or any name when the task declares none. */
export type EventName<E extends Record<string, TSchema>> = [keyof E] extends [never] ? string : keyof E & string;
/** The payload type of an event: from its schema, or unknown when undeclared. */
export type EventPayload<E extends Record<string, TSchema>, K extends string> = K extends keyof E ? Static<E[K]> : unknown;

/** The durable context a handler receives. Everything on it survives crashes and retries. */
export interface TaskContext<E extends Record<string, TSchema> = Record<string, TSchema>> {
  /** The execution being run. */
  readonly executionId: string;
  /** 1 for the first attempt, counting every retry and takeover. */
  readonly attempt: number;
  /**
   * When the execution was scheduled for: its `start_at` (for a cron execution, the fire time), else
   * when it was scheduled. The same on every attempt, so a report for "the day of this run" stays put.
   */
  readonly scheduledFor: Date;
  /**
   * Aborted when the execution stops here: cancelled (ExecutionCancelledError), past its task's
   * timeout (ExecutionTimeoutError), its lease lost (LeaseLostError), or handed back by a worker
   * shutting down (ExecutionReleasedError); the reason says which.
   */
  readonly signal: AbortSignal;
  /** A logger bound to this execution. */
  readonly log: Logger;
  /**
   * Runs `fn` once per execution and stores its result before going on; a replay returns the stored
   * result without calling `fn`. The result is its JSON form on every run, the first included (a Date
   * becomes its ISO string); a value JSON cannot hold (Map, Set, BigInt, a function) fails the step.
   * A failed attempt is retried by `options.retry` (the task's policy by default); an attempt past
   * `options.timeout` fails with StepTimeoutError. When the retries run out the step throws
   * StepFailedError, on this run and every replay. A name repeated within one execution is numbered
   * in call order.
   */
  step<T>(name: string, fn: StepFn<T>, options?: StepOptions): Promise<Jsonify<Awaited<T>>>;
  /** Pauses durably for `duration` ('10m', 5000): the worker slot is freed meanwhile. */
  sleep(name: string, duration: Duration): Promise<void>;
  /** Pauses durably until `until`. */
  sleepUntil(name: string, until: Date | string | number): Promise<void>;
  /**
   * Pauses until a client delivers the event `name`, and returns its payload (typed from the task's
   * `events` schema). On timeout it throws EventTimeoutError.
   */
  waitForEvent<K extends EventName<E>>(name: K, options?: { timeout?: Duration }): Promise<EventPayload<E, K>>;
  /**
   * Starts a child execution of `task` and waits durably for it (the worker slot is freed meanwhile);
   * returns its output, or throws ChildExecutionError when it fails or is cancelled, and
   * ChildTimeoutError when `timeout` passes first (the child goes on). Started once per execution: a
   * replay finds the same child. Given the task's definition rather than its name, `data` and the
   * output are typed. Cancelling this execution cancels the child.
   */
  invoke<D extends TSchema, CE extends Record<string, TSchema>, R>(name: string, task: TaskDefinition<D, CE, R>, data: Static<D>, options?: InvokeOptions): Promise<Awaited<R>>;
  invoke(name: string, task: string, data?: unknown, options?: InvokeOptions): Promise<unknown>;
  /**
   * Starts a child execution of `task` without waiting for it, and returns its execution id. Started
   * once per execution: a replay returns the same id. Cancelling this execution cancels the child.
   */
  spawn<D extends TSchema, CE extends Record<string, TSchema>, R>(name: string, task: TaskDefinition<D, CE, R>, data: Static<D>, options?: ChildOptions): Promise<string>;
  spawn(name: string, task: string, data?: unknown, options?: ChildOptions): Promise<string>;
  /**
   * One code version carrying the old path and the new one: true when this execution reaches this
   * point under code that has the change `changeId` (it records a marker in the steps, kept for every
   * replay), false when it is replaying a history recorded before the change, past this point, by
   * code without it. Put the new code under `if (ctx.patched('id'))` and keep the old in the else.
   * Asked again with the same id in one execution, it answers the same.
   */
  patched(changeId: string): boolean;
  /**
   * For the release after every execution that ran without the change has finished: the old path is
   * gone, and a history recorded before the change (no marker, past this point) fails the execution
   * with NonDeterminismError instead of running new code over it. Records the marker as patched()
   * does, so that a worker still running the release with patched() replays these histories too; a
   * later release drops the call.
   */
  deprecatePatch(changeId: string): void;
}

/** Options of a child execution. */
export interface ChildOptions {
  /** Start no earlier than this instant, as POST /executions' `start_at`. */
  startAt?: Date | string;
  /** The child's priority (-1,000,000 to 1,000,000); by default, its parent's. */
  priority?: number;
}

/** Options of ctx.invoke. */
export interface InvokeOptions extends ChildOptions {
  /** Stop waiting this long after the child is started ('1h', 60000): ChildTimeoutError. Stored once. */
  timeout?: Duration;
}

export interface TaskOptions<D extends TSchema, E extends Record<string, TSchema>, R> {
  /** The name clients schedule. */
  name: string;
  /**
   * The release of this task's code ('2', '2026-11-27', a build number). An execution is pinned to
   * the version it started on: only workers serving that version claim it again, so a deploy lets
   * old executions drain on old workers while new ones start on new ones. Without one the task is
   * unversioned, a version of its own.
   */
  version?: string | number;
  /** JSON Schema (TypeBox) of `data`; the API rejects data that does not match. */
  data?: D;
  /** Schemas of the events the handler waits for, by name. */
  events?: E;
  retry?: Partial<RetryPolicy>;
  /**
   * The whole execution may take this long from its first start ('1h'), sleeps and waits included;
   * past it, the execution fails with ExecutionTimeoutError and its handler is stopped.
   */
  timeout?: Duration;
  /**
   * Runs the task on a schedule as well: a cron pattern (UTC), or `{ pattern, timezone, data }`. Every
   * worker serving the task fires it, and each fire time starts exactly one execution between them.
   */
  cron?: string | CronTrigger<Static<D>>;
  /**
   * At most `limit` executions of the task run at once over all workers (the rest stay pending until
   * one finishes, sleeps or waits for an event), to spare a rate-limited API or a small database. With
   * `key`, a JSON Pointer into `data` such as '/tenantId', the limit holds per value of that key, and
   * claims take turns between keys so that one tenant's backlog never starves another's.
   */
  concurrency?: FlowOptions['concurrency'];
  /**
   * At most `limit` starts (first attempts, retries and takeovers; not resumes after a sleep or an
   * event) in any window of `period` ('1m', 1000) over all workers, per value of `key` when given.
   */
  rateLimit?: FlowOptions['rateLimit'];
  /**
   * A schedule within `period` of the previous one, with the same `key` value when given, replaces the
   * data of the execution still pending and pushes its start to `period` from now: the execution
   * runs once, with the last data, when the schedules stop for a while.
   */
  debounce?: FlowOptions['debounce'];
  run(ctx: TaskContext<E>, data: Static<D>): Promise<R>;
}

const TASK_BRAND = Symbol.for('stepwise.task');

/** A registered task: what `defineTask` returns and the worker runs. */
export interface TaskDefinition<D extends TSchema = TSchema, E extends Record<string, TSchema> = Record<string, TSchema>, R = unknown>
  extends TaskOptions<D, E, R> {
  readonly [TASK_BRAND]: true;
}

export const TASK_NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,254}$/;

/** Declares a task. The static types of `data` and of each event payload come from the schemas. */
export function defineTask<D extends TSchema = TUnknown, E extends Record<string, TSchema> = Record<never, TSchema>, R = unknown>(
  options: TaskOptions<D, E, R>,
): TaskDefinition<D, E, R> {
  if (typeof options?.name !== 'string' || !TASK_NAME.test(options.name)) {
    throw new TypeError(`task name ${JSON.stringify(options?.name)} must be 1-255 letters, digits or ._:- characters`);
  }
  if (typeof options.run !== 'function') throw new TypeError(`task ${options.name} needs a run(ctx, data) function`);
  for (const event of Object.keys(options.events ?? {})) checkEventName(event, `task ${options.name}: events`);
  parseFlow(options.name, options);
  parseTaskVersion(options.name, options.version);
  if (options.timeout !== undefined) parseDuration(options.timeout, `task ${options.name}: timeout`);
  if (options.cron !== undefined) {
    const { data } = parseCronTrigger(options.name, options.cron);
    const validate = options.data ? compileJsonSchema(options.data) : undefined;
    if (validate && !validate(data)) {
      throw new TypeError(`task ${options.name}: cron data does not match the task's data schema: ${describeSchemaErrors(validate.errors)}`);
    }
  }
  return Object.freeze({ ...options, [TASK_BRAND]: true as const });
}

/** True for a value made by defineTask (in this or another copy of the package). */
export function isTaskDefinition(value: unknown): value is TaskDefinition {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[TASK_BRAND] === true;
}
