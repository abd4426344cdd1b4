import type { components } from '../../generated/openapi';
import { nextFireAfter } from '../domain/cron';
import { EXECUTION_STATUSES, type ExecutionStatus } from '../domain/status';
import type { ScheduledRecord } from '../store/executions';
import type { AttemptRecord } from '../store/attempts';
import type { ExecutionRecord, StepRecord } from '../store/rows';
import type { KeyCount, TaskCron, TaskRecord } from '../store/tasks';
import type { WorkerRecord } from '../store/workers';
import type { VersionCount } from '../store/versions';
import { shownVersion } from '../domain/version';
import type { ExecutionError } from '../store/rows';

type Schemas = components['schemas'];

/** ISO 8601 UTC with milliseconds and Z, as the contract requires. */
function isoOrNull(value: Date | null): string | null {
  return value === null ? null : value.toISOString();
}

/** The full Execution resource. */
export function toExecution(e: ExecutionRecord): Schemas['Execution'] {
  const waits = (e.openWaits ?? []).map((w) => ({ event_name: w.eventName, since: w.since.toISOString(), timeout_at: isoOrNull(w.timeoutAt) }));
  return {
    execution_id: e.id,
    task: e.task,
    status: e.status,
    priority: e.priority,
    concurrency_key: e.concurrencyKey,
    task_version: shownVersion(e.taskVersion),
    data: e.data ?? null,
    steps_completed: e.stepsCompleted,
    current_step: e.currentStep,
    waiting_for_event: waits[0] ?? null,
    waiting_for_events: waits,
    attempt: e.attempt,
    created_at: e.createdAt.toISOString(),
    start_at: isoOrNull(e.startAt),
    started_at: isoOrNull(e.startedAt),
    completed_at: isoOrNull(e.completedAt),
    output: e.output ?? null,
    error: e.error === null ? null : toError(e.error),
    parent_execution_id: e.parentId,
    idempotency_key: e.idempotencyKey,
    tags: e.tags,
  };
}

/** A recorded error as clients see it: its type, message and retryability, and a divergence's operations. */
export function toError(e: ExecutionError): Schemas['ExecutionError'] {
  const base = { type: e.type, message: e.message, retryable: e.retryable };
  return e.divergence ? { ...base, divergence: e.divergence } : base;
}

/** The short form the schedule endpoint answers with. */
export function toScheduledExecution(e: ScheduledRecord, debounced?: boolean): Schemas['ScheduledExecution'] {
  const body = { execution_id: e.id, task: e.task, status: e.status, created_at: e.createdAt.toISOString() };
  return debounced === undefined ? body : { ...body, debounced };
}

/** A list item. */
export function toExecutionSummary(e: ExecutionRecord): Schemas['ExecutionSummary'] {
  return {
    execution_id: e.id,
    task: e.task,
    status: e.status,
    priority: e.priority,
    task_version: shownVersion(e.taskVersion),
    created_at: e.createdAt.toISOString(),
    started_at: isoOrNull(e.startedAt),
    completed_at: isoOrNull(e.completedAt),
    tags: e.tags,
  };
}

export function toStep(s: StepRecord): Schemas['Step'] {
  return {
    seq: s.seq,
    name: s.name,
    kind: s.kind,
    status: s.outcome ?? (s.completed ? 'completed' : 'in_progress'),
    result: s.result ?? null,
    wake_at: isoOrNull(s.wakeAt),
    started_at: s.startedAt.toISOString(),
    completed_at: isoOrNull(s.completedAt),
    error: s.error === null ? null : toError(s.error),
    failed_attempts: s.failures.map((f) => ({ attempt: f.attempt, error: f.error, started_at: new Date(f.started_at).toISOString(), ended_at: new Date(f.ended_at).toISOString() })),
  };
}

/** A recorded schedule's next fire time; null when it has none, or when its record cannot be read. */
function nextFireOrNull(cron: TaskCron, now: Date): Date | null {
  try {
    return nextFireAfter(cron, now);
  } catch {
    return null;
  }
}

/**
 * A registered task with its executions counted by status (every status present, zero when none) and
 * the live workers that serve it.
 */
export function toTask(
  t: TaskRecord,
  counts: ReadonlyMap<string, number>,
  workers: number,
  keys: readonly KeyCount[] = [],
  versions: readonly VersionCount[] = [],
  now = new Date(),
): Schemas['Task'] {
  const { concurrency, rateLimit, debounce } = t.flow;
  const byStatus = Object.fromEntries(EXECUTION_STATUSES.map((s: ExecutionStatus) => [s, counts.get(s) ?? 0])) as Schemas['TaskCounts'];
  return {
    name: t.name,
    data_schema: t.dataSchema ?? null,
    event_schemas: t.eventSchemas ?? {},
    cron: t.cron === null ? null : { pattern: t.cron.pattern, timezone: t.cron.timezone, next_at: isoOrNull(nextFireOrNull(t.cron, now)) },
    concurrency_limit: t.concurrencyLimit,
    concurrency: concurrency === null ? null : { limit: concurrency.limit, key: concurrency.key?.pointer ?? null },
    rate_limit: rateLimit === null ? null : { limit: rateLimit.limit, period_ms: rateLimit.periodMs, key: rateLimit.key?.pointer ?? null },
    debounce: debounce === null ? null : { period_ms: debounce.periodMs, key: debounce.key?.pointer ?? null },
    versions: versions.map((v) => ({ version: shownVersion(v.version), current: v.current, workers: v.workers, pending: v.pending, running: v.running, waiting: v.waiting })),
    keys: keys.map((k) => ({ key: k.key, running: k.running, waiting: k.waiting, started_in_window: k.startedInWindow })),
    paused: t.paused,
    updated_at: t.updatedAt.toISOString(),
    workers,
    counts: byStatus,
  };
}

/** A registered worker as the registry reports it. */
export function toWorker(w: WorkerRecord): Schemas['Worker'] {
  return {
    worker_id: w.id,
    hostname: w.hostname,
    pid: w.pid,
    version: w.version,
    tasks: w.tasks,
    task_versions: Object.fromEntries(w.tasks.map((t) => [t, shownVersion(w.taskVersions[t] ?? '')])),
    concurrency: w.concurrency,
    running: w.running,
    started_at: w.startedAt.toISOString(),
    last_seen_at: w.lastSeenAt.toISOString(),
    state: w.state,
  };
}

/** An attempt as the operator's view shows it. */
export function toAttempt(a: AttemptRecord): Schemas['Attempt'] {
  return {
    attempt: a.attempt,
    worker_id: a.workerId,
    started_at: isoOrNull(a.startedAt),
    ended_at: isoOrNull(a.endedAt),
    outcome: a.outcome,
    error: a.error === null ? null : { type: a.error.type, message: a.error.message, retryable: a.error.retryable, ...(a.error.stack === undefined ? {} : { stack: a.error.stack }) },
  };
}
