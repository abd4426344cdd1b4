import type { Static, TSchema } from '@sinclair/typebox';
import type { ValidateFunction } from 'ajv';
import { findUnstorableText } from '../domain/storable-text';
import { toInstant } from '../domain/instant';
import { reservedKeyPrefix } from '../domain/keys';
import { describeBadTags } from '../domain/tags';
import { compileJsonSchema, describeSchemaErrors, SchemaValidators } from '../domain/json-schema';
import { toStoredValue } from '../domain/json';
import { parseTraceparent } from '../domain/traceparent';
import type { ExecutionStatus } from '../domain/status';
import { onCallerConnection, type Queryable } from '../store/db';
import { insertDebouncedWith, insertExecutionsWith } from '../store/executions';
import { readDataSchemaText } from '../store/tasks';
import { activeTraceparent } from '../telemetry/active-span';
import { isTaskDefinition, TASK_NAME, type TaskDefinition } from './task';
import { TaskNotRegisteredError } from '../errors';

export type { Queryable };
export { TaskNotRegisteredError };

/** Options of schedule(), as POST /executions' body. */
export interface ScheduleOptions {
  /** At most one execution exists per key: a repeat returns it (`created: false`) instead. */
  idempotencyKey?: string;
  /** Start no earlier than this instant (a Date, or ISO 8601 text with a time zone). */
  startAt?: Date | string;
  /** Up to 20 distinct labels of 1-64 characters to find the execution by (`GET /executions?tag=`). */
  tags?: readonly string[];
  /** Claimed before due executions of lower priority: a whole number from -1,000,000 to 1,000,000 (default 0). */
  priority?: number;
  /**
   * The W3C traceparent (version 00) whose trace the execution's attempts join as spans. By default
   * the caller's active OpenTelemetry span, if there is one.
   */
  traceparent?: string;
}

/** What schedule() created, or found under the idempotency key. */
export interface Scheduled {
  executionId: string;
  task: string;
  status: ExecutionStatus;
  createdAt: Date;
  /** False when the idempotency key found an execution that already existed, or a debounce kept one. */
  created: boolean;
  /** For a debounced task: true when this schedule updated the execution still pending instead of making one. */
  debounced?: boolean;
}

/** An idempotency key already names an execution of another task. */
export class IdempotencyKeyConflictError extends Error {
  override name = 'IdempotencyKeyConflictError';
  constructor(
    readonly idempotencyKey: string,
    /** The task of the execution that holds the key. */
    readonly existingTask: string,
  ) {
    super(`idempotency key ${JSON.stringify(idempotencyKey)} is already used by an execution of task "${existingTask}"`);
  }
}

/** Compiled once per schema: a definition's by identity, a registered one's by its JSON text. */
const definedValidators = new WeakMap<object, ValidateFunction>();
const registeredValidators = new SchemaValidators(1000);

/** A schema that does not compile is the task's fault, reported as a TypeError naming it. */
function compiledFor<T>(task: string, compile: () => T): T {
  try {
    return compile();
  } catch (err) {
    throw new TypeError(`the data schema of task "${task}" does not compile: ${(err as Error).message}`);
  }
}

function definedValidator(task: string, schema: object): ValidateFunction {
  let validate = definedValidators.get(schema);
  if (!validate) definedValidators.set(schema, (validate = compiledFor(task, () => compileJsonSchema(schema))));
  return validate;
}

/** By the schema's JSON text as PostgreSQL prints it, so the caller's type parsers play no part. */
function registeredValidator(task: string, text: string): ValidateFunction {
  return compiledFor(task, () => registeredValidators.get(text));
}

/**
 * Schedules an execution of `task` with a statement on `db`: your own node-postgres client, pool
 * client or pool, or a knex instance or transaction. Inside a transaction, the execution exists (and a
 * worker hears of it) only if that transaction commits, so it can never be lost or started for writes
 * that rolled back. Checks what the API checks: `data` against the task's schema, the key, the start
 * time; a bad input throws TypeError or RangeError before anything is written. No API server is
 * involved, and no worker need be running.
 *
 * Given the task's definition, `data` is typed and checked against its schema, and the task need not
 * be registered yet: the execution waits, pending, for a worker that serves it. Given a task's name,
 * the task must be registered (a worker serving it has started once), as the API requires, and `data`
 * is checked against the schema recorded then, read in the same transaction; an unknown task throws
 * TaskNotRegisteredError.
 */
export async function schedule<D extends TSchema, E extends Record<string, TSchema>, R>(
  db: Queryable,
  task: TaskDefinition<D, E, R>,
  data: Static<D>,
  options?: ScheduleOptions,
): Promise<Scheduled>;
export async function schedule(db: Queryable, task: string, data?: unknown, options?: ScheduleOptions): Promise<Scheduled>;
export async function schedule(db: Queryable, task: TaskDefinition | string, data?: unknown, options: ScheduleOptions = {}): Promise<Scheduled> {
  const byName = typeof task === 'string';
  if (byName ? !TASK_NAME.test(task) : !isTaskDefinition(task)) {
    const given = typeof task === 'string' ? JSON.stringify(task.slice(0, 255)) : task === null ? 'null' : `a ${typeof task}`;
    throw new TypeError(`schedule: the task must be a defineTask() result or a task name (1-255 letters, digits or ._:- characters), not ${given}`);
  }
  const name = byName ? task : task.name;
  const what = `the data of an execution of task "${name}"`;
  // Checked as it will be stored: what JSON.stringify makes of it (NaN becomes null, toJSON() runs).
  const stored = toStoredValue(data, what);
  const checkData = (validate: ValidateFunction | undefined) => {
    if (validate && !validate(stored)) throw new TypeError(`${what} does not match its schema: ${describeSchemaErrors(validate.errors)}`);
  };
  if (!byName && task.data !== undefined) checkData(definedValidator(name, task.data));
  const key = options.idempotencyKey;
  if (key !== undefined) {
    // Counted in characters (code points), as the contract's maxLength is.
    if (typeof key !== 'string' || key.length === 0 || [...key].length > 255) throw new TypeError('schedule: idempotencyKey must be a string of 1 to 255 characters');
    const reserved = reservedKeyPrefix(key);
    if (reserved) throw new TypeError(`schedule: idempotencyKey must not start with "${reserved.prefix}", which ${reserved.owner} use`);
    if (findUnstorableText(key) !== undefined) throw new TypeError('schedule: idempotencyKey holds text PostgreSQL cannot store');
  }
  const tags = options.tags;
  if (tags !== undefined) {
    const problem = describeBadTags(tags);
    if (problem) throw new TypeError(`schedule: tags ${problem}`);
  }
  const priority = options.priority;
  if (priority !== undefined && (typeof priority !== 'number' || !Number.isInteger(priority) || Math.abs(priority) > 1_000_000)) {
    throw new RangeError(`schedule: priority must be a whole number from -1,000,000 to 1,000,000, not ${String(priority)}`);
  }
  let startAt: Date | undefined;
  if (options.startAt !== undefined) {
    startAt = toInstant(options.startAt);
    if (!startAt) throw new RangeError(`schedule: startAt ${String(options.startAt)} is not an instant (a Date, or ISO 8601 text with a time zone, in the years 0001-9999)`);
  }
  if (options.traceparent !== undefined && !parseTraceparent(options.traceparent)) {
    throw new TypeError('schedule: traceparent must be a W3C traceparent of version 00 (00-<32 hex>-<16 hex>-<2 hex>, lowercase)');
  }
  const traceparent = options.traceparent ?? activeTraceparent();
  const [result] = await onCallerConnection(db, async (run) => {
    let debounced = !byName && task.debounce !== undefined;
    if (byName) {
      const registered = await readDataSchemaText(run, name);
      if (!registered) throw new TaskNotRegisteredError(name);
      // NULL (or JSON null) is a task without a schema; any other value, even `false`, is one, as for the API.
      if (registered.schema !== null && registered.schema !== 'null') checkData(registeredValidator(name, registered.schema));
      debounced = registered.debounced;
    }
    const item = { task: name, data: stored, idempotencyKey: key, startAt, tags, priority, traceparent };
    // A task debounced in its definition but not (yet) in its registered row is scheduled as usual.
    const one = debounced ? await insertDebouncedWith(run, item) : undefined;
    return one ? [one] : insertExecutionsWith(run, [item]);
  });
  if (!result.created && result.execution.task !== name) throw new IdempotencyKeyConflictError(key ?? '', result.execution.task);
  const { execution } = result;
  const scheduled: Scheduled = { executionId: execution.id, task: execution.task, status: execution.status, createdAt: execution.createdAt, created: result.created };
  return result.debounced === undefined ? scheduled : { ...scheduled, debounced: result.debounced };
}
