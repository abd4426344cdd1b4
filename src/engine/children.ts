import type { ValidateFunction } from 'ajv';
import { compileJsonSchema } from '../domain/json-schema';
import type { Db } from '../store/db';
import { getTask } from '../store/tasks';
import { NonRetryableError } from './errors';
import type { TaskRegistry } from './registry';

/** Compiled validators kept, by schema text; the oldest is dropped past this. */
const MAX_VALIDATORS = 200;
/** How long a registered task's schema read from the database is trusted (a fan-out reads it once). */
const SCHEMA_TTL_MS = 2000;

/**
 * Checks a child execution's task and data before a handler starts it, as the API checks a client's:
 * the task must be registered (by this worker or any other: its row in stepwise.tasks), and the data
 * must match its schema. A task served here is checked against its own definition; any other is read
 * from the database and trusted for SCHEMA_TTL_MS, so a fan-out of many children reads it once and a
 * schema another worker has just registered applies within two seconds. An unknown task is not
 * remembered: it may be registered any moment.
 */
export class ChildTaskChecker {
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly schemas = new Map<string, { schema: unknown; readAt: number }>();

  constructor(
    private readonly db: Db,
    private readonly registry: TaskRegistry,
  ) {}

  /**
   * Throws a plain Error (the attempt fails and is retried: a worker serving the task may come) when
   * the task is unknown, and NonRetryableError when the data does not match: another attempt would
   * send the same data.
   */
  async check(task: string, data: unknown): Promise<void> {
    const local = this.registry.get(task);
    let schema: unknown;
    if (local) schema = local.def.data;
    else {
      const cached = this.schemas.get(task);
      if (cached && Date.now() - cached.readAt < SCHEMA_TTL_MS) schema = cached.schema;
      else {
        const row = await getTask(this.db, task);
        if (!row) throw new Error(`cannot start a child execution of task "${task}": no worker has registered it`);
        schema = row.dataSchema;
        if (this.schemas.size >= MAX_VALIDATORS) this.schemas.delete(this.schemas.keys().next().value as string);
        this.schemas.set(task, { schema, readAt: Date.now() });
      }
    }
    if (schema === undefined || schema === null) return;
    const validate = this.validator(schema as object);
    if (!validate(data)) {
      const why = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
      throw new NonRetryableError(`data for a child execution of task "${task}" does not match its schema: ${why}`);
    }
  }

  private validator(schema: object): ValidateFunction {
    const key = JSON.stringify(schema);
    let validate = this.validators.get(key);
    if (!validate) {
      validate = compileJsonSchema(schema);
      if (this.validators.size >= MAX_VALIDATORS) this.validators.delete(this.validators.keys().next().value as string);
      this.validators.set(key, validate);
    }
    return validate;
  }
}
