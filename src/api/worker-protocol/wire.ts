// The worker protocol's shapes: activations and per-item answers as openapi.yaml writes them.
import type { components } from '../../../generated/openapi';
import { AppError, InvalidDataError, LeaseLostError } from '../../errors';
import type { ReplayRecord } from '../../store/steps';
import type { Activation } from './claims';

type Schemas = components['schemas'];
export type ItemError = Schemas['WorkerItemError'];
export type ItemDone = Schemas['WorkerItemDone'];

/** A written item's answer. */
export const DONE: ItemDone = Object.freeze({ status: 200 }) as ItemDone;

/** A refused item's answer: the error's status and envelope. */
export function itemError(err: AppError): ItemError {
  const error: ItemError['error'] = { code: err.code, message: err.message };
  if (err.details && err.details.length > 0) error.details = err.details;
  return { status: err.status as ItemError['status'], error };
}

/** The answer of an item whose lease does not hold. */
export const leaseLost = (executionId: string): ItemError => itemError(new LeaseLostError(executionId));

/**
 * Undefined when `value`'s JSON fits in `maxBytes`, else the answer refusing it (invalid_data naming
 * where): what an execution may store is bounded (limits.valueBytes), whatever the body limit.
 */
export function tooLarge(value: unknown, maxBytes: number, path: string): ItemError | undefined {
  if (value === undefined) return undefined;
  const bytes = Buffer.byteLength(JSON.stringify(value) ?? '');
  if (bytes <= maxBytes) return undefined;
  return itemError(new InvalidDataError(`${path} is over the value limit`, [{ path, message: `is ${bytes} bytes of JSON, over the limit of ${maxBytes}` }]));
}

/** A recorded operation as the activation carries it. */
function toRecordedOperation(r: ReplayRecord): Schemas['RecordedOperation'] {
  const op: Schemas['RecordedOperation'] = {
    seq: r.seq,
    name: r.name,
    kind: r.kind,
    completed: r.completed,
    wake_at: r.wakeAt ? r.wakeAt.toISOString() : null,
    started_at: r.startedAt.toISOString(),
    ended_at_us: r.endedAt,
    outcome: r.outcome,
    error: r.error as Schemas['ExecutionError'] | null,
    failures: r.failures as Schemas['StepFailure'][],
    attempt_base: r.attemptBase,
  };
  // Absent: the step returned nothing (SQL NULL); null is the JSON value null.
  if (r.result !== undefined) op.result = r.result;
  return op;
}

/** A claimed execution as the claim answers it. */
export function toActivation(a: Activation): Schemas['Activation'] {
  const { claimed } = a;
  const e = claimed.execution;
  return {
    execution_id: e.id,
    task: e.task,
    task_version: a.version === '' ? null : a.version,
    data: e.data,
    attempt: e.attempt,
    attempts_since_progress: e.attemptsSinceProgress,
    steps_completed: e.stepsCompleted,
    previous_status: claimed.previousStatus,
    lease_token: e.leaseToken as string,
    lease_expires_at: new Date(claimed.claimedAt.getTime() + a.leaseMs).toISOString(),
    claimed_at: claimed.claimedAt.toISOString(),
    started_at: claimed.startedAt.toISOString(),
    scheduled_for: claimed.scheduledFor.toISOString(),
    parent_execution_id: e.parentId ?? null,
    traceparent: e.traceparent ?? null,
    history: a.history.map(toRecordedOperation),
  };
}
