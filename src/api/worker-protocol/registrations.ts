import type { components } from '../../../generated/openapi';
import { parseCronTrigger } from '../../domain/cron';
import { parseFlow, type FlowOptions } from '../../domain/flow';
import { compileJsonSchema, describeSchemaErrors } from '../../domain/json-schema';
import { toStoredValue } from '../../domain/json';
import type { TaskValidators } from '../../store/task-schemas';
import { toErrorDetails } from '../validation';
import { resolveRetryPolicy } from '../../domain/retry';
import { parseTaskVersion } from '../../domain/version';
import { InvalidDataError, type ErrorDetail } from '../../errors';
import type { TaskRegistration } from '../../store/tasks';

type WorkerTask = components['schemas']['WorkerTask'];

/**
 * A child execution's data as it will be stored, checked against its task's schema, with the message
 * a worker with a database gives (see ChildTaskChecker): invalid_data otherwise.
 */
export function toValidChildData(task: TaskValidators, data: unknown, path: string): unknown {
  let stored: unknown;
  try {
    stored = toStoredValue(data, `the data of a child execution of task ${JSON.stringify(task.name)}`);
  } catch (err) {
    throw new InvalidDataError((err as Error).message, [{ path, message: (err as Error).message }]);
  }
  const validate = task.validateData;
  if (validate && !validate(stored)) {
    throw new InvalidDataError(`data for a child execution of task ${JSON.stringify(task.name)} does not match its schema: ${describeSchemaErrors(validate.errors)}`, toErrorDetails(path, validate.errors));
  }
  return stored;
}

/** Runs one check of a task's definition; what it throws becomes a detail at `path`. */
function checked<T>(details: ErrorDetail[], path: string, check: () => T): T | undefined {
  try {
    return check();
  } catch (err) {
    details.push({ path, message: (err as Error).message });
    return undefined;
  }
}

/** A JSON Schema as the API will compile it: an object or a boolean (null or absent: none). */
function schemaOf(details: ErrorDetail[], path: string, schema: unknown): unknown {
  if (schema === undefined || schema === null) return null;
  if (typeof schema !== 'object' && typeof schema !== 'boolean') {
    details.push({ path, message: 'must be a JSON Schema (an object or a boolean)' });
    return null;
  }
  checked(details, path, () => compileJsonSchema(schema as object));
  return schema;
}

/**
 * The tasks of a remote worker's registration as the registry records them, checked as defineTask
 * checks a TypeScript worker's (the same domain rules: flow keys, durations, cron patterns, JSON
 * Schemas that compile). Throws invalid_data naming every problem.
 */
export function toTaskRegistrations(tasks: readonly WorkerTask[]): TaskRegistration[] {
  const details: ErrorDetail[] = [];
  const seen = new Set<string>();
  const registrations = tasks.map((t, i): TaskRegistration => {
    const at = `body/tasks/${i}`;
    if (seen.has(t.name)) details.push({ path: `${at}/name`, message: `task ${JSON.stringify(t.name)} is listed twice` });
    seen.add(t.name);
    const flow: FlowOptions = {};
    if (t.concurrency) flow.concurrency = { limit: t.concurrency.limit, ...(t.concurrency.key != null ? { key: t.concurrency.key } : {}) };
    if (t.rate_limit) flow.rateLimit = { limit: t.rate_limit.limit, period: t.rate_limit.period_ms, ...(t.rate_limit.key != null ? { key: t.rate_limit.key } : {}) };
    if (t.debounce) flow.debounce = { period: t.debounce.period_ms, ...(t.debounce.key != null ? { key: t.debounce.key } : {}) };
    const retry = t.retry;
    const eventSchemas = Object.fromEntries(Object.entries(t.event_schemas ?? {}).map(([event, schema]) => [event, schemaOf(details, `${at}/event_schemas/${event}`, schema)]));
    const cron = t.cron ? checked(details, `${at}/cron`, () => parseCronTrigger(t.name, { pattern: t.cron?.pattern as string, timezone: t.cron?.timezone })) : undefined;
    return {
      name: t.name,
      dataSchema: schemaOf(details, `${at}/data_schema`, t.data_schema),
      eventSchemas,
      retry: checked(details, `${at}/retry`, () =>
        resolveRetryPolicy(retry ? { maxAttempts: retry.max_attempts, initialDelay: retry.initial_delay_ms, maxDelay: retry.max_delay_ms, factor: retry.factor } : {}),
      ),
      cron: cron ? { pattern: cron.pattern, timezone: cron.timezone } : null,
      flow: checked(details, at, () => parseFlow(t.name, flow)),
      version: checked(details, `${at}/version`, () => parseTaskVersion(t.name, t.version)) ?? '',
    };
  });
  if (details.length > 0) throw new InvalidDataError('the tasks cannot be registered', details);
  return registrations;
}
