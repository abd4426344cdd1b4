import { toStoredValue } from '../domain/json';
import { InvalidDataError, PayloadTooLargeError } from '../errors';
import type { TaskValidators } from '../store/task-schemas';
import { toErrorDetails } from './validation';

/** The value as it will be stored, the same check schedule() makes; what cannot be stored is invalid_data. */
function asStored(value: unknown, path: string): unknown {
  try {
    return toStoredValue(value, path);
  } catch (err) {
    throw new InvalidDataError(`${path} cannot be stored`, [{ path, message: (err as Error).message }]);
  }
}

/**
 * `data` as it will be stored (see toStoredValue: what a handler will receive), checked against the
 * task's schema; throws invalid_data (with details) when it fails.
 */
export function toValidData(task: TaskValidators, data: unknown): unknown {
  const stored = asStored(data, 'body/data');
  if (task.validateData && !task.validateData(stored)) {
    throw new InvalidDataError(`data does not match the schema of task ${JSON.stringify(task.name)}`, toErrorDetails('body/data', task.validateData.errors));
  }
  return stored;
}

/**
 * `payload` as it will be stored, checked against the schema the task declared for `event`
 * (invalid_data otherwise) and against the largest value an execution may hold (payload_too_large).
 * A task no longer registered has no schema: any payload is accepted.
 */
export function toValidEvent(task: TaskValidators | undefined, event: string, payload: unknown, maxBytes: number): unknown {
  const stored = asStored(payload, 'body');
  // The engine's limit on a stored value (STEPWISE_MAX_VALUE_BYTES), when the body limit is set above it.
  if (Buffer.byteLength(JSON.stringify(stored) ?? '') > maxBytes) throw new PayloadTooLargeError(maxBytes, 'event payload');
  const validate = task?.validateEvent.get(event);
  if (task && validate && !validate(stored)) {
    throw new InvalidDataError(
      `payload does not match the schema of event ${JSON.stringify(event.slice(0, 100))} of task ${JSON.stringify(task.name)}`,
      toErrorDetails('body', validate.errors),
    );
  }
  return stored;
}
