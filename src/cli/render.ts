/** The operator commands' human output, one function per kind of answer. `--json` bypasses all of it. */
import { describeLimits } from '../domain/flow-text';
import { describeExecutionVersion, describeVersions, hasVersions, versionLabel } from '../domain/version-text';
import type {
  Attempt,
  BulkResult,
  CancelledExecution,
  EventDelivered,
  Execution,
  ExecutionList,
  RetriedExecution,
  ScheduledExecution,
  Step,
  Task,
  TaskPauseState,
  UpgradedExecution,
  WorkerInfo,
} from '../client';
import { compactJson, formatSpan, formatUtc, formatWhen, renderFields, renderTable, sanitize, truncate } from './format';

const NAME_MAX = 40;
const NOTE_MAX = 60;

/** `Type: message`, for an execution's or a step's error. */
function describeError(error: { type: string; message: string } | null | undefined): string {
  return error ? `${error.type}: ${error.message}` : '–';
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** A page of executions, with where it sits in the whole list. */
export function renderExecutionList(list: ExecutionList): string {
  const { executions, total, offset } = list;
  if (executions.length === 0) {
    return total === 0 ? 'no executions\n' : `no executions from offset ${offset} (${plural(total, 'execution')} in all)\n`;
  }
  const table = renderTable(
    [{ header: 'id' }, { header: 'task', max: NAME_MAX }, { header: 'status' }, { header: 'created (UTC)' }, { header: 'duration', align: 'right' }, { header: 'tags', max: 40 }],
    executions.map((e) => [e.execution_id, e.task, e.status, formatUtc(e.created_at), formatSpan(e.started_at, e.completed_at), e.tags.join(',')]),
  );
  const last = offset + executions.length;
  const more = last < total ? ` (next page: --offset ${last})` : '';
  return `${table}${offset + 1}-${last} of ${plural(total, 'execution')}${more}\n`;
}

/** One execution's full state, as label/value lines. */
export function renderExecution(e: Execution): string {
  const fields: [string, string][] = [
    ['execution', e.execution_id],
    ['task', e.task],
    ['task version', describeExecutionVersion(e)],
    ['status', e.status],
    ...(e.priority !== 0 ? [['priority', String(e.priority)] as [string, string]] : []),
    ...(e.concurrency_key !== null ? [['concurrency key', e.concurrency_key === '' ? '(no value)' : e.concurrency_key] as [string, string]] : []),
    ['attempt', String(e.attempt)],
    ['steps', `${e.steps_completed} completed${e.current_step ? `, in progress: ${e.current_step}` : ''}`],
  ];
  for (const w of e.waiting_for_events) {
    fields.push(['waiting for', `event "${w.event_name}" since ${formatUtc(w.since)}${w.timeout_at ? `, times out ${formatWhen(w.timeout_at)}` : ''}`]);
  }
  if (e.parent_execution_id) fields.push(['parent', e.parent_execution_id]);
  if (e.idempotency_key !== null) fields.push(['key', e.idempotency_key]);
  if (e.tags.length > 0) fields.push(['tags', e.tags.join(', ')]);
  fields.push(['created', formatWhen(e.created_at)]);
  if (e.start_at) fields.push(['start at', formatWhen(e.start_at)]);
  fields.push(['started', formatWhen(e.started_at)], ['completed', formatWhen(e.completed_at)]);
  if (e.started_at) fields.push([e.completed_at ? 'took' : 'running for', formatSpan(e.started_at, e.completed_at)]);
  fields.push(['data', compactJson(e.data)], ['output', compactJson(e.output)]);
  fields.push(['error', e.error ? `${describeError(e.error)}${e.error.retryable ? ' (retryable)' : ''}` : '–']);
  if (e.error?.divergence) fields.push(['diverged', describeDivergence(e.error.divergence)]);
  return renderFields(fields);
}

type Divergence = NonNullable<NonNullable<Execution['error']>['divergence']>;

/** `at operation #3: the history has step "charge", the new code called step "charge-v2"`. */
function describeDivergence(d: Divergence): string {
  const op = (o: Divergence['called']) => `${o.kind} ${JSON.stringify(o.name)}`;
  return `at operation #${d.operation}: the history has ${d.recorded ? op(d.recorded) : 'no operation there'}, the new code called ${op(d.called)}`;
}

/**
 * One line of `executions watch`: when the state was seen, its status, its steps, and what it is
 * doing (the step in progress, the events it waits for) or how it ended.
 */
export function renderWatchLine(e: Execution, seenAt: Date): string {
  const parts = [`${formatUtc(seenAt.toISOString())} UTC`, e.status.padEnd(9), plural(e.steps_completed, 'step') + ' completed'];
  if (e.attempt > 1) parts.push(`attempt ${e.attempt}`);
  const events = e.waiting_for_events.map((w) => `"${w.event_name}"${w.timeout_at ? ` (times out ${formatUtc(w.timeout_at)} UTC)` : ''}`);
  if (events.length > 0) parts.push(`waiting for event ${events.join(', ')}`);
  else if (e.current_step) parts.push(`${e.status === 'waiting' ? 'waiting in' : 'in progress'}: ${e.current_step}`);
  if (e.status === 'completed') parts.push(`output ${truncate(compactJson(e.output), NOTE_MAX)}`);
  else if (e.error) parts.push(`${e.status === 'pending' ? 'retrying after ' : ''}${describeError(e.error)}`);
  return `${truncate(sanitize(parts.join('  ')), 240)}\n`;
}

/** What a step's row says beyond its status: its result, its error, its wake-up time, its child. */
function stepNote(step: Step): string {
  if (step.status === 'failed' || step.error) return `error ${describeError(step.error)}`;
  const result = step.result as Record<string, unknown> | null;
  if (step.kind === 'child' && result && typeof result.execution_id === 'string') {
    return `child ${result.execution_id}${typeof result.status === 'string' ? ` ${result.status}` : ''}`;
  }
  if (step.status === 'in_progress' && step.wake_at) return `${step.kind === 'sleep' ? 'wakes' : 'times out'} ${formatUtc(step.wake_at)}`;
  if (step.status === 'completed') return `result ${compactJson(step.result)}`;
  return '';
}

/** An execution's durable history: one row per operation, then every failed attempt of a step. */
export function renderSteps(steps: readonly Step[]): string {
  if (steps.length === 0) return 'no steps recorded\n';
  const history = renderTable(
    [
      { header: 'seq', align: 'right' },
      { header: 'name', max: NAME_MAX },
      { header: 'kind' },
      { header: 'status' },
      { header: 'started (UTC)' },
      { header: 'duration', align: 'right' },
      { header: 'failed attempts', align: 'right' },
      { header: 'note', max: NOTE_MAX },
    ],
    steps.map((s) => [
      String(s.seq),
      s.name,
      s.kind,
      s.status,
      formatUtc(s.started_at),
      s.completed_at ? formatSpan(s.started_at, s.completed_at) : '–',
      String(s.failed_attempts.length),
      stepNote(s),
    ]),
  );
  const failures = steps.flatMap((s) => s.failed_attempts.map((f) => ({ step: s, failure: f })));
  if (failures.length === 0) return history;
  const attempts = renderTable(
    [{ header: 'seq', align: 'right' }, { header: 'step', max: NAME_MAX }, { header: 'attempt', align: 'right' }, { header: 'started (UTC)' }, { header: 'duration', align: 'right' }, { header: 'error', max: 100 }],
    failures.map(({ step, failure }) => [
      String(step.seq),
      step.name,
      String(failure.attempt),
      formatUtc(failure.started_at),
      formatSpan(failure.started_at, failure.ended_at),
      describeError(failure.error),
    ]),
  );
  return `${history}\nFailed attempts\n${attempts}`;
}

/**
 * The registered tasks with their executions counted by status, and their versions: each with its
 * workers and executions in flight, `!` where no worker serves executions pinned to it.
 */
export function renderTasks(tasks: readonly Task[]): string {
  if (tasks.length === 0) return 'no tasks registered (start a worker with --tasks)\n';
  return renderTable(
    [
      { header: 'name', max: NAME_MAX },
      { header: 'paused' },
      { header: 'workers', align: 'right' },
      ...(['pending', 'running', 'waiting', 'completed', 'failed', 'cancelled'] as const).map((header) => ({ header, align: 'right' as const })),
      { header: 'limits', max: NOTE_MAX },
      { header: 'versions', max: NOTE_MAX },
      { header: 'cron', max: NOTE_MAX },
    ],
    tasks.map((t) => [
      t.name,
      t.paused ? 'yes' : 'no',
      String(t.workers),
      ...[t.counts.pending, t.counts.running, t.counts.waiting, t.counts.completed, t.counts.failed, t.counts.cancelled].map(String),
      describeLimits(t).map((l) => l.text).join(', ') || '–',
      hasVersions(t.versions) ? describeVersions(t.versions) : '–',
      t.cron ? `${t.cron.pattern} ${t.cron.timezone}${t.cron.next_at ? `, next ${formatUtc(t.cron.next_at)} UTC` : ''}` : '–',
    ]),
  );
}

/** The worker processes the server knows of, with how busy each is. */
export function renderWorkers(workers: readonly WorkerInfo[], nowMs = Date.now()): string {
  if (workers.length === 0) return 'no workers\n';
  return renderTable(
    [
      { header: 'worker' },
      { header: 'host', max: 30 },
      { header: 'pid', align: 'right' },
      { header: 'version', max: 16 },
      { header: 'state' },
      { header: 'running', align: 'right' },
      { header: 'tasks', max: NOTE_MAX },
      { header: 'started (UTC)' },
      { header: 'last seen', align: 'right' },
    ],
    workers.map((w) => [
      w.worker_id,
      w.hostname,
      String(w.pid),
      w.version,
      w.state,
      `${w.running}/${w.concurrency}`,
      w.tasks.join(', '),
      formatUtc(w.started_at),
      formatSpan(w.last_seen_at, null, nowMs) + ' ago',
    ]),
  );
}

/** The answer to a schedule: created, or found by its idempotency key. */
export function renderScheduled(s: ScheduledExecution, created: boolean): string {
  const task = truncate(sanitize(s.task), NAME_MAX);
  return created
    ? `scheduled execution ${s.execution_id} of ${task} (${s.status})\n`
    : `execution ${s.execution_id} of ${task} already exists for that key (${s.status}); nothing new was scheduled\n`;
}

export function renderCancelled(c: CancelledExecution): string {
  return `cancelled execution ${c.execution_id}\n`;
}

export function renderDelivered(d: EventDelivered): string {
  return `delivered event "${truncate(sanitize(d.event_name), NAME_MAX)}" to execution ${d.execution_id} (now ${d.execution_status})\n`;
}

/** The answer to an upgrade: the version the execution is pinned to now, and before. */
export function renderUpgraded(u: UpgradedExecution): string {
  const from = u.previous_task_version === null ? 'no version' : versionLabel(u.previous_task_version);
  return `upgraded execution ${u.execution_id} from ${from} to ${versionLabel(u.task_version)} (${u.status})\n`;
}

/** The answer to a retry: the execution is pending again. */
export function renderRetried(r: RetriedExecution): string {
  return `retried execution ${r.execution_id} (now ${r.status})\n`;
}

/**
 * What a bulk action did. `matched` reaching the limit means more may match: a second run takes
 * them, since what the first one changed no longer matches.
 */
export function renderBulkResult(r: BulkResult, limit: number): string {
  const more = r.matched >= limit ? `\nthe limit (${limit}) was reached: more executions may match; run the command again for them` : '';
  return `matched ${r.matched}, changed ${r.changed}${more}\n`;
}

/** The answer to a pause or a resume: whether the task is paused now. */
export function renderPauseState(p: TaskPauseState): string {
  return `task ${truncate(sanitize(p.name), NAME_MAX)} is ${p.paused ? 'paused: its executions are not claimed until it is resumed' : 'not paused'}\n`;
}

/** An attempt's outcome; null means it has not ended (running, or suspended in a sleep or a wait). */
function attemptOutcome(a: Attempt): string {
  return a.outcome ?? 'in progress';
}

/** A stack trace, its lines indented under a heading; each line is sanitized on its own. */
function renderStack(a: Attempt): string {
  const lines = (a.error?.stack ?? '').split(/\r?\n/).filter((line) => line.trim() !== '');
  return [`attempt ${a.attempt} (${attemptOutcome(a)}):`, ...lines.map((line) => `  ${sanitize(line.trimEnd())}`)].join('\n') + '\n';
}

/** An execution's attempts, oldest first; with `stacks`, after the table the stack of each attempt that recorded one. */
export function renderAttempts(attempts: readonly Attempt[], stacks: boolean, nowMs = Date.now()): string {
  if (attempts.length === 0) return 'no attempts yet (the execution has not been claimed by a worker)\n';
  const table = renderTable(
    [
      { header: 'attempt', align: 'right' },
      { header: 'outcome' },
      { header: 'worker' },
      { header: 'started (UTC)' },
      { header: 'duration', align: 'right' },
      { header: 'error', max: 100 },
    ],
    attempts.map((a) => [String(a.attempt), attemptOutcome(a), a.worker_id ?? '–', formatUtc(a.started_at), formatSpan(a.started_at, a.ended_at, nowMs), describeError(a.error)]),
  );
  if (!stacks) return table;
  const traced = attempts.filter((a) => a.error?.stack);
  if (traced.length === 0) return `${table}\nno stack traces recorded\n`;
  return `${table}\nStack traces\n${traced.map(renderStack).join('\n')}`;
}
