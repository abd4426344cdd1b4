// The end-of-run checks of `make chaos` for what an operator did: retries of failed and cancelled
// executions, bulk retries, and pauses of a task. verify.ts checks their outcomes and steps as any
// kind's; these check what is particular to an operator's actions.
import { isDeepStrictEqual } from 'node:util';
import type pg from 'pg';
import type { DrivenResult } from './driver';
import type { BulkAction, PauseWindow } from './operate';
import { OPERATOR_KINDS, operatorFailures, type PlannedExecution } from './outcomes';
import type { EffectLine } from './verify';

/** What the operator did during the run, as chaos.ts hands it over. */
export interface OperatorLog {
  bulkActions: readonly BulkAction[];
  pauses: readonly PauseWindow[];
}

export interface OperateInput extends OperatorLog {
  plans: readonly PlannedExecution[];
  driven: readonly DrivenResult[];
  /** The execution a plan's key holds, when one does. */
  executionOf(plan: PlannedExecution): { id: string; status: string; tags: string[] | null } | undefined;
  stepOf(executionId: string, name: string): { kind: string; completed: boolean; completed_at: Date | null } | undefined;
  linesOf(executionId: string, step: string): readonly EffectLine[];
}

export interface OperateCounts {
  /** Executions of the operator kinds that ended completed after at least one retry. */
  retriedToCompletion: number;
  /** Steps completed before the first retry, and of them those that ran once (else a crash came first). */
  stepsBeforeRetry: number;
  stepsBeforeRetryRunOnce: number;
  /** Bulk actions: executions they matched and changed. */
  bulkMatched: number;
  bulkChanged: number;
  /** Per pause: its task, how long, what was pending at the resume, and attempts started meanwhile (must be 0). */
  pauses: Array<{ task: string; ms: number; pendingAtResume: number; startedWhilePaused: number }>;
}

/** The steps of an operator kind that complete before its first failure or cancel: they must never run again. */
const STEPS_BEFORE_RETRY = ['before'];
/**
 * Slack for comparing the database's clock (an attempt's start) with the driver's (the pause's answer),
 * both the same machine's: a claim whose transaction began before the pause committed may start after
 * it only with an earlier now().
 */
const CLOCK_SLACK_MS = 100;

type Violate = (kind: string, message: string) => void;

export async function verifyOperations(client: pg.Client, input: OperateInput, violate: Violate): Promise<OperateCounts> {
  const counts: OperateCounts = { retriedToCompletion: 0, stepsBeforeRetry: 0, stepsBeforeRetryRunOnce: 0, bulkMatched: 0, bulkChanged: 0, pauses: [] };
  const drivenByKey = new Map(input.driven.filter(Boolean).map((d) => [d.plan.idempotencyKey, d]));
  for (const plan of input.plans) {
    if (!OPERATOR_KINDS.has(plan.kind)) continue;
    const e = input.executionOf(plan);
    const operated = drivenByKey.get(plan.idempotencyKey)?.operated;
    if (!e || !operated) continue;
    for (const u of operated.unexpected) violate('operator-answer', `${e.id} (${plan.kind}): ${u}`);
    if (plan.tags && !isDeepStrictEqual(e.tags, plan.tags)) violate('tags', `${e.id} (${plan.kind}) has tags ${JSON.stringify(e.tags)}, scheduled with ${JSON.stringify(plan.tags)}`);
    if (e.status !== 'completed') continue;
    if (operated.firstRetryAt === undefined) {
      violate('not-retried', `${e.id} (${plan.kind}) completed, but the driver never retried it`);
      continue;
    }
    counts.retriedToCompletion += 1;
    checkStepsBeforeRetry(plan, e.id, operated.firstRetryAt, input, counts, violate);
    checkAttempts(plan, e.id, drivenByKey.get(plan.idempotencyKey), violate);
  }
  for (const action of input.bulkActions) checkBulkAction(action, counts, violate);
  counts.pauses = await checkPauses(client, input.pauses, violate);
  return counts;
}

/**
 * What completed before the first retry was not run again after it: every run of it (more than one
 * only when a crash came before its record) started before the retry, and its record is older.
 */
function checkStepsBeforeRetry(plan: PlannedExecution, id: string, retryAt: number, input: OperateInput, counts: OperateCounts, violate: Violate): void {
  for (const name of STEPS_BEFORE_RETRY) {
    const step = input.stepOf(id, name);
    if (!step?.completed || !step.completed_at) continue; // verify.ts reports the missing step
    counts.stepsBeforeRetry += 1;
    if (step.completed_at.getTime() > retryAt) violate('recorded-after-retry', `${id} (${plan.kind}) step ${name} was recorded at ${step.completed_at.toISOString()}, after the first retry at ${new Date(retryAt).toISOString()}`);
    const runs = input.linesOf(id, name);
    if (runs.length === 1) counts.stepsBeforeRetryRunOnce += 1;
    for (const r of runs) {
      if (r.at >= retryAt) violate('rerun-after-retry', `${id} (${plan.kind}) step ${name} ran at ${new Date(r.at).toISOString()} (attempt ${r.attempt}), after the first retry at ${new Date(retryAt).toISOString()}`);
    }
  }
}

/**
 * GET …/attempts: every failed run kept as a `failed` attempt with its StepFailedError, in order; a
 * cancel-retry's cancel as one `cancelled` attempt (a retry race's cancels as at most one each); the
 * last attempt completed.
 */
function checkAttempts(plan: PlannedExecution, id: string, driven: DrivenResult | undefined, violate: Violate): void {
  const operated = driven?.operated;
  const attempts = operated?.attempts;
  if (!operated || !attempts) {
    violate('attempts', `${id} (${plan.kind}): GET …/attempts was not read`);
    return;
  }
  const failed = attempts.filter((a) => a.outcome === 'failed').map((a) => ({ type: a.error?.type, message: a.error?.message }));
  const wantFailed = operatorFailures(plan);
  if (!isDeepStrictEqual(failed, wantFailed)) violate('attempts', `${id} (${plan.kind}) kept failed attempts ${JSON.stringify(failed)}, expected ${JSON.stringify(wantFailed)}`);
  const cancelled = attempts.filter((a) => a.outcome === 'cancelled').length;
  const wantCancelled = plan.kind === 'cancel-retry' ? 'exactly 1' : `at most ${operated.cancelsWon}`;
  if (plan.kind === 'cancel-retry' ? cancelled !== 1 : cancelled > operated.cancelsWon) violate('attempts', `${id} (${plan.kind}) kept ${cancelled} cancelled attempts, expected ${wantCancelled}`);
  const last = attempts[attempts.length - 1];
  if (last?.outcome !== 'completed' || last.ended_at === null) violate('attempts', `${id} (${plan.kind}) last attempt ${JSON.stringify(last)}, expected a completed one`);
  for (let i = 1; i < attempts.length; i++) {
    if (attempts[i].attempt <= attempts[i - 1].attempt) violate('attempts', `${id} (${plan.kind}) attempts out of order: ${attempts.map((a) => a.attempt).join(',')}`);
  }
}

/**
 * A bulk retry matched only its group's failed members and changed no more than it matched; with
 * every answer received at once (none sent again), it matched and changed exactly the failed members.
 */
function checkBulkAction(action: BulkAction, counts: OperateCounts, violate: Violate): void {
  if (action.error || !action.result) {
    violate('bulk-action', `bulk retry of ${action.tag} failed: ${action.error}`);
    return;
  }
  const { matched, changed } = action.result;
  counts.bulkMatched += matched;
  counts.bulkChanged += changed;
  if (changed > matched || matched > action.members) violate('bulk-action', `bulk retry of ${action.tag} matched ${matched} and changed ${changed}, of ${action.members} members`);
  else if (!action.unsure && (matched !== action.failedMembers || changed !== action.failedMembers)) {
    violate('bulk-action', `bulk retry of ${action.tag} matched ${matched} and changed ${changed}, expected ${action.failedMembers} (its failed members)`);
  }
}

/** No attempt of a paused task started between the pause's answer and the resume's request. */
async function checkPauses(client: pg.Client, pauses: readonly PauseWindow[], violate: Violate): Promise<OperateCounts['pauses']> {
  if (pauses.length === 0) return [];
  const tasks = [...new Set(pauses.map((p) => p.task))];
  // Attempts that ended without ending their execution are rows of their own; the current or last one
  // is on the execution's row (see migration 011).
  const { rows } = await client.query<{ id: string; task: string; attempt: number; started_at: Date }>(
    `SELECT e.id, e.task, a.attempt, a.started_at FROM stepwise.attempts a JOIN stepwise.executions e ON e.id = a.execution_id
      WHERE e.task = ANY($1) AND a.started_at IS NOT NULL
     UNION ALL
     SELECT id, task, attempt, attempt_started_at FROM stepwise.executions WHERE task = ANY($1) AND attempt_started_at IS NOT NULL`,
    [tasks],
  );
  return pauses.map((p) => {
    const from = p.pausedAt + CLOCK_SLACK_MS;
    const inWindow = rows.filter((r) => r.task === p.task && r.started_at.getTime() > from && r.started_at.getTime() < p.resumeSentAt);
    // An attempt can be both a row of its own and its execution's current one.
    const started = [...new Map(inWindow.map((r) => [`${r.id} ${r.attempt}`, r])).values()];
    for (const r of started) {
      violate('started-while-paused', `${r.id} (${p.task}) started attempt ${r.attempt} at ${r.started_at.toISOString()}, while its task was paused from ${new Date(p.pausedAt).toISOString()} to ${new Date(p.resumeSentAt).toISOString()}`);
    }
    return { task: p.task, ms: p.resumeSentAt - p.pausedAt, pendingAtResume: p.pendingAtResume, startedWhilePaused: started.length };
  });
}
