import { TERMINAL_STATUSES, type ExecutionStatus } from '../domain/status';
import type { Divergence } from '../domain/thrown';

/** The finished statuses as an SQL list, for `status IN (...)`: literals, so partial-index predicates can be proven. */
export const TERMINAL_STATUS_LIST = TERMINAL_STATUSES.map((s) => `'${s}'`).join(', ');

/** The error recorded on a failed (or retrying, or cancelled) execution. Never carries a stack. */
export interface ExecutionError {
  type: string;
  message: string;
  retryable: boolean;
  /** A NonDeterminismError's recorded and called operations. */
  divergence?: Divergence;
}

/** An execution as the rest of the code sees it; `rowToExecution` is the one mapping from SQL. */
export interface ExecutionRecord {
  id: string;
  task: string;
  status: ExecutionStatus;
  data: unknown;
  idempotencyKey: string | null;
  attempt: number;
  stepsCompleted: number;
  currentStep: string | null;
  waitEventName: string | null;
  waitSince: Date | null;
  waitTimeoutAt: Date | null;
  dueAt: Date | null;
  /** The later start asked for at scheduling, or null for "at once". */
  startAt: Date | null;
  leaseToken: string | null;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
  output: unknown;
  error: ExecutionError | null;
  /** The execution whose handler started this one (ctx.invoke, ctx.spawn), or null. */
  parentId: string | null;
  /** Attempts since one last recorded a step: what the task's retry budget counts. */
  attemptsSinceProgress: number;
  /** The labels it was scheduled with, to find it by; empty when none. */
  tags: string[];
  /** Claimed before due executions of lower priority. */
  priority: number;
  /** The version of the task's code it started on: null before its first claim, '' for an unversioned task. */
  taskVersion: string | null;
  /** The value of its task's concurrency key it counts under, or null when that limit has no key. */
  concurrencyKey: string | null;
  /** The W3C traceparent it was scheduled with (migration 017), or null. */
  traceparent: string | null;
  /** The event waits still open, earliest first; read by getExecution only (empty unless waiting). */
  openWaits?: OpenWait[];
}

/** An event an execution waits for: since when, and until when (null: no timeout). */
export interface OpenWait {
  eventName: string;
  since: Date;
  timeoutAt: Date | null;
}

export interface ExecutionRow {
  id: string;
  task: string;
  status: ExecutionStatus;
  data: unknown;
  idempotency_key: string | null;
  attempt: number;
  steps_completed: number;
  current_step: string | null;
  wait_event_name: string | null;
  wait_since: Date | null;
  wait_timeout_at: Date | null;
  due_at: Date | null;
  start_at: Date | null;
  lease_token: string | null;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  output: unknown;
  error: ExecutionError | null;
  parent_id: string | null;
  attempts_since_progress: number;
  /** NULL when none (never empty), so that the tag index holds tagged executions only. */
  tags: string[] | null;
  priority: number;
  task_version: string | null;
  concurrency_key: string | null;
  traceparent: string | null;
}

export function rowToExecution(row: ExecutionRow): ExecutionRecord {
  return {
    id: row.id,
    task: row.task,
    status: row.status,
    data: row.data,
    idempotencyKey: row.idempotency_key,
    attempt: row.attempt,
    stepsCompleted: row.steps_completed,
    currentStep: row.current_step,
    waitEventName: row.wait_event_name,
    waitSince: row.wait_since,
    waitTimeoutAt: row.wait_timeout_at,
    dueAt: row.due_at,
    startAt: row.start_at,
    leaseToken: row.lease_token,
    createdAt: row.created_at,
    startedAt: row.started_at,
    completedAt: row.completed_at,
    output: row.output,
    error: row.error,
    parentId: row.parent_id ?? null,
    attemptsSinceProgress: row.attempts_since_progress ?? 0,
    tags: row.tags ?? [],
    priority: row.priority ?? 0,
    taskVersion: row.task_version ?? null,
    concurrencyKey: row.concurrency_key ?? null,
    traceparent: row.traceparent ?? null,
  };
}

/** Kinds of durable operation a handler records, in call order. */
export type StepKind = 'step' | 'sleep' | 'event' | 'child' | 'patch';

/** How a recorded operation ended, beyond `completed`: a step whose retries ran out, or one cut by a cancel. */
export type StepOutcome = 'failed' | 'cancelled';

/** One failed attempt of a step, kept for the operator. */
export interface StepFailure {
  attempt: number;
  error: ExecutionError;
  started_at: string;
  ended_at: string;
}

export interface StepRecord {
  executionId: string;
  seq: number;
  name: string;
  kind: StepKind;
  completed: boolean;
  result: unknown;
  wakeAt: Date | null;
  startedAt: Date;
  completedAt: Date | null;
  /** For an event wait: the event's name (the step's name is numbered when repeated). */
  eventName: string | null;
  outcome: StepOutcome | null;
  /** The final error of a failed step. */
  error: ExecutionError | null;
  /** The failed attempts of a step, oldest first. */
  failures: StepFailure[];
}

export interface StepRow {
  execution_id: string;
  seq: number;
  name: string;
  kind: StepKind;
  completed: boolean;
  result: unknown;
  wake_at: Date | null;
  started_at: Date;
  completed_at: Date | null;
  event_name: string | null;
  outcome: StepOutcome | null;
  error: ExecutionError | null;
  failures: StepFailure[] | null;
}

export function rowToStep(row: StepRow): StepRecord {
  return {
    executionId: row.execution_id,
    seq: row.seq,
    name: row.name,
    kind: row.kind,
    completed: row.completed,
    result: row.result,
    wakeAt: row.wake_at,
    startedAt: row.started_at,
    completedAt: row.completed_at,
    eventName: row.event_name ?? null,
    outcome: row.outcome ?? null,
    error: row.error ?? null,
    failures: row.failures ?? [],
  };
}

/** JSON for a jsonb parameter: pg would otherwise send arrays as Postgres arrays. */
export function toJsonb(value: unknown): string | null {
  return value === undefined ? null : JSON.stringify(value);
}
