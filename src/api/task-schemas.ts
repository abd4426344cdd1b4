import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { InvalidDataError, TaskNotRegisteredError } from '../errors';
import type { Db } from '../store/db';
import { getTask } from '../store/tasks';
import { toErrorDetails } from './validation';

/** A task as the API needs it: validators for its data and for each event it declared. */
export interface TaskValidators {
  name: string;
  validateData: ValidateFunction | undefined;
  validateEvent: ReadonlyMap<string, ValidateFunction>;
}

interface CacheEntry {
  task: TaskValidators;
  loadedAt: number;
}

export interface TaskSchemaCacheOptions {
  /** How long a task row is trusted before it is read again (a worker may re-register new schemas). */
  ttlMs?: number;
  /** Distinct compiled schemas kept; the oldest is dropped past this. */
  maxValidators?: number;
  now?: () => number;
}

/**
 * Validators for the schemas workers registered in stepwise.tasks. A task row is read on a miss and
 * again after `ttlMs`, so a task registered a moment ago is usable at once and a changed schema takes
 * effect within seconds. Unknown tasks are not cached: the next request reads again. Compiled
 * validators are cached by the schema's JSON, so re-reading an unchanged row compiles nothing.
 */
export class TaskSchemaCache {
  private readonly tasks = new Map<string, CacheEntry>();
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly ttlMs: number;
  private readonly maxValidators: number;
  private readonly now: () => number;

  constructor(
    private readonly db: Db,
    options: TaskSchemaCacheOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 3000;
    this.maxValidators = options.maxValidators ?? 1000;
    this.now = options.now ?? Date.now;
  }

  /** The task's validators; throws TaskNotRegisteredError when no worker registered it. */
  async getTask(name: string): Promise<TaskValidators> {
    const cached = this.tasks.get(name);
    if (cached && this.now() - cached.loadedAt < this.ttlMs) return cached.task;
    const row = await getTask(this.db, name);
    if (!row) {
      this.tasks.delete(name);
      throw new TaskNotRegisteredError(name);
    }
    const task: TaskValidators = {
      name,
      validateData: this.compile(row.dataSchema),
      validateEvent: new Map(
        Object.entries(row.eventSchemas ?? {}).flatMap(([event, schema]) => {
          const v = this.compile(schema);
          return v ? [[event, v] as const] : [];
        }),
      ),
    };
    this.tasks.set(name, { task, loadedAt: this.now() });
    return task;
  }

  /** Throws invalid_data (with details) when `data` fails the task's schema. */
  assertValidData(task: TaskValidators, data: unknown): void {
    if (task.validateData && !task.validateData(data)) {
      throw new InvalidDataError(`data does not match the schema of task ${JSON.stringify(task.name)}`, toErrorDetails('body/data', task.validateData.errors));
    }
  }

  /** Throws invalid_data (with details) when `payload` fails the schema the task declared for `event`. */
  assertValidEvent(task: TaskValidators, event: string, payload: unknown): void {
    const validate = task.validateEvent.get(event);
    if (validate && !validate(payload)) {
      throw new InvalidDataError(
        `payload does not match the schema of event ${JSON.stringify(event.slice(0, 100))} of task ${JSON.stringify(task.name)}`,
        toErrorDetails('body', validate.errors),
      );
    }
  }

  private compile(schema: unknown): ValidateFunction | undefined {
    if (schema === null || schema === undefined) return undefined;
    const key = JSON.stringify(schema);
    let validate = this.validators.get(key);
    if (!validate) {
      // One Ajv per schema: worker schemas may reuse an $id, which a shared Ajv would refuse.
      const ajv = new Ajv2020({ strict: false, allErrors: true });
      addFormats(ajv);
      validate = ajv.compile(schema as object);
      if (this.validators.size >= this.maxValidators) this.validators.delete(this.validators.keys().next().value as string);
      this.validators.set(key, validate);
    }
    return validate;
  }
}
