import type { Static, TSchema } from '@sinclair/typebox';
import type { ValidateFunction } from 'ajv';
import { findUnstorableText } from '../api/storable-text';
import { toInstant } from '../domain/instant';
import { compileJsonSchema, describeSchemaErrors } from '../domain/json-schema';
import { toStorableJson } from '../domain/json';
import type { ExecutionStatus } from '../domain/status';
import { CHILD_KEY_PREFIX } from '../store/children';
import { insertExecutionsOn, type Queryable } from '../store/executions';
import { CRON_KEY_PREFIX } from './cron';
import { isTaskDefinition, type TaskDefinition } from './task';

export type { Queryable };

/** Options of schedule(), as POST /executions' body. */
export interface ScheduleOptions {
  /** At most one execution exists per key: a repeat returns it (`created: false`) instead. */
  idempotencyKey?: string;
  /** Start no earlier than this instant (a Date, or ISO 8601 text with a time zone). */
  startAt?: Date | string;
}

/** What schedule() created, or found under the idempotency key. */
export interface Scheduled {
  executionId: string;
  task: string;
  status: ExecutionStatus;
  createdAt: Date;
  /** False when the idempotency key found an execution that already existed. */
  created: boolean;
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

const RESERVED_KEY_PREFIXES = [CRON_KEY_PREFIX, CHILD_KEY_PREFIX];
const validators = new WeakMap<TSchema, ValidateFunction>();

function validatorFor(schema: TSchema): ValidateFunction {
  let validate = validators.get(schema);
  if (!validate) {
    validate = compileJsonSchema(schema);
    validators.set(schema, validate);
  }
  return validate;
}

/**
 * Schedules an execution of `task` with a statement on `db`: your own node-postgres client, pool
 * client or pool, or a knex instance or transaction. Inside a transaction, the execution exists (and a
 * worker hears of it) only if that transaction commits, so it can never be lost or started for writes
 * that rolled back. Checks what the API checks: `data` against the task's schema, the key, the start
 * time; a bad input throws TypeError or RangeError before anything is written. No API server is
 * involved, and no worker need be running: the execution waits, pending, for one that serves the task.
 */
export async function schedule<D extends TSchema, E extends Record<string, TSchema>, R>(
  db: Queryable,
  task: TaskDefinition<D, E, R>,
  data: Static<D>,
  options: ScheduleOptions = {},
): Promise<Scheduled> {
  if (!isTaskDefinition(task)) throw new TypeError('schedule: the task must be a defineTask() result');
  const what = `the data of an execution of task "${task.name}"`;
  // Checked as it will be stored: what JSON.stringify makes of it (NaN becomes null, toJSON() runs).
  const json = toStorableJson(data === undefined ? null : data, what) as string;
  const stored: unknown = JSON.parse(json);
  const unstorable = findUnstorableText(stored);
  if (unstorable !== undefined) throw new TypeError(`${what} holds text PostgreSQL cannot store (an unpaired surrogate) at ${unstorable || '/'}`);
  if (task.data) {
    const validate = validatorFor(task.data);
    if (!validate(stored)) throw new TypeError(`${what} does not match its schema: ${describeSchemaErrors(validate.errors)}`);
  }
  const key = options.idempotencyKey;
  if (key !== undefined) {
    // Counted in characters (code points), as the contract's maxLength is.
    if (typeof key !== 'string' || key.length === 0 || [...key].length > 255) throw new TypeError('schedule: idempotencyKey must be a string of 1 to 255 characters');
    const reserved = RESERVED_KEY_PREFIXES.find((prefix) => key.startsWith(prefix));
    if (reserved) throw new TypeError(`schedule: idempotencyKey must not start with "${reserved}", which Stepwise uses itself`);
    if (findUnstorableText(key) !== undefined) throw new TypeError('schedule: idempotencyKey holds text PostgreSQL cannot store');
  }
  let startAt: Date | undefined;
  if (options.startAt !== undefined) {
    startAt = toInstant(options.startAt);
    if (!startAt) throw new RangeError(`schedule: startAt ${String(options.startAt)} is not an instant (a Date, or ISO 8601 text with a time zone, in the years 0001-9999)`);
  }
  const [result] = await insertExecutionsOn(db, [{ task: task.name, data: stored, idempotencyKey: key, startAt }]);
  if (!result.created && result.execution.task !== task.name) throw new IdempotencyKeyConflictError(key ?? '', result.execution.task);
  const { execution } = result;
  return { executionId: execution.id, task: execution.task, status: execution.status, createdAt: execution.createdAt, created: result.created };
}
