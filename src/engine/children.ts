import { TaskSchemaCache } from '../store/task-schemas';
import { describeSchemaErrors } from '../domain/json-schema';
import { TaskNotRegisteredError } from '../errors';
import type { Db } from '../store/db';
import { NonRetryableError } from './errors';

/** How long a task's registration read from the database is trusted (a fan-out reads it once). */
const SCHEMA_TTL_MS = 2000;

/**
 * Checks a child execution's task and data before a handler starts it, as the API checks a client's,
 * and through the API's cache of registrations (TaskSchemaCache): the task must be registered (by
 * this worker or any other: its row in stepwise.tasks), and the data must match the schema recorded
 * there. A row is trusted for SCHEMA_TTL_MS, so a fan-out of many children reads it once and a schema
 * a worker has just registered applies within two seconds.
 */
export class ChildTaskChecker {
  private readonly registrations: TaskSchemaCache;

  constructor(db: Db) {
    this.registrations = new TaskSchemaCache(db, { ttlMs: SCHEMA_TTL_MS });
  }

  /**
   * Throws a plain Error (the attempt fails and is retried: a worker serving the task may come) when
   * the task is unknown, and NonRetryableError when the data does not match: another attempt would
   * send the same data.
   */
  async check(task: string, data: unknown): Promise<void> {
    const registered = await this.registrations.getTask(task).catch((err: unknown) => {
      if (err instanceof TaskNotRegisteredError) throw new Error(`cannot start a child execution of task "${task}": no worker has registered it`);
      throw err;
    });
    const validate = registered.validateData;
    if (validate && !validate(data)) {
      throw new NonRetryableError(`data for a child execution of task "${task}" does not match its schema: ${describeSchemaErrors(validate.errors)}`);
    }
  }
}
