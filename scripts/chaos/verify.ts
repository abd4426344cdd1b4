// The end-of-run checks of `make chaos`, against the database and the side-effect logs of the workers.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import type { DrivenResult } from './driver';
import { verifyOperations, type OperateCounts, type OperatorLog } from './verify-operate';
import { asLanded, newRaceCounts, verifyRace, type RaceCounts } from './verify-races';
import {
  CRON_OUTPUT,
  CRON_TASK,
  expectedOutcome,
  expectedSteps,
  fanoutChildren,
  FIRST_ATTEMPT_KINDS,
  isExhausted,
  isRetryableAttempt,
  PARALLEL_EVENTS,
  parallelEventPayload,
  RACE_KINDS,
  retriedSteps,
  type ChaosKind,
  type PlannedExecution,
} from './outcomes';

export interface Verification {
  violations: string[];
  /** Violations by kind (the list above is capped). */
  violationCounts: Record<string, number>;
  counts: {
    executions: number;
    byStatus: Record<string, number>;
    stepRecords: number;
    sideEffectLines: number;
    /** Step runs whose result was not the one recorded (the worker died or lost its lease first): allowed. */
    unrecordedReruns: number;
    /** Executions that ran on more than one attempt. */
    multiAttempt: number;
    /** Final statuses per planned kind. */
    byKind: Partial<Record<ChaosKind, Record<string, number>>>;
    /** Failed step attempts recorded (kept for /steps), those that timed out, and retries that waited durably (backoff > 5 s). */
    stepFailures: number;
    stepTimeouts: number;
    durableStepRetries: number;
    /** Executions of the kinds that must finish on their first attempt which ran on more (a fault came meanwhile: allowed). */
    retriedAfterFault: number;
    /** Executions the cron task's fire times started, and the seconds the workers ran (at most one each). */
    cronFires: number;
    cronSeconds: number;
    /** What the operator's retries, bulk retries and pauses came to (see verify-operate.ts). */
    operations: OperateCounts;
    /** What the race kinds came to (see verify-races.ts). */
    races: RaceCounts;
  };
}

export interface EffectLine {
  executionId: string;
  step: string;
  attempt: number;
  at: number;
  run: string;
  /** The step's own attempt (fn's `attempt`), for steps with a retry policy of their own. */
  stepAttempt?: number;
}

/** Reads every `worker-*.log` of the side-effect folder. */
export function readSideEffects(dir: string): EffectLine[] {
  const lines: EffectLine[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.log'))) {
    for (const line of readFileSync(path.join(dir, file), 'utf8').split('\n')) {
      const [executionId, step, attempt, at, run, stepAttempt] = line.split(' ');
      if (run) lines.push({ executionId, step, attempt: Number(attempt), at: Number(at), run, stepAttempt: stepAttempt === undefined ? undefined : Number(stepAttempt) });
    }
  }
  return lines;
}

const MAX_LISTED = 50;

/** Checks the run's outcome; every broken promise is one violation. */
export async function verifyRun(
  url: string,
  runId: string,
  plans: readonly PlannedExecution[],
  driven: readonly DrivenResult[],
  effectsDir: string,
  /** When the workers were started, and when all of them had stopped (epoch ms): the cron task's window. */
  workersRan: { from: number; to: number },
  /**
   * When faults that can cost an execution its attempt came (epoch ms): worker SIGKILLs (from = to)
   * and PostgreSQL restarts. Without it, no execution is required to finish on its first attempt.
   */
  faultWindows?: ReadonlyArray<{ from: number; to: number }>,
  /** The operator's bulk actions and pauses (the driver's Operator stats). */
  operations: OperatorLog = { bulkActions: [], pauses: [] },
): Promise<Verification> {
  const violations: string[] = [];
  const violationCounts: Record<string, number> = {};
  const violate = (kind: string, message: string) => {
    violationCounts[kind] = (violationCounts[kind] ?? 0) + 1;
    if (violations.length < MAX_LISTED) violations.push(`${kind}: ${message}`);
  };
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows: executions } = await client.query<{
      id: string;
      task: string;
      idempotency_key: string | null;
      status: string;
      output: unknown;
      error: { type: string; message: string; retryable: boolean } | null;
      attempt: number;
      completed_at: Date | null;
      start_at: Date | null;
      started_at: Date | null;
      parent_id: string | null;
      data: unknown;
      created_at: Date;
      tags: string[] | null;
    }>('SELECT id, task, idempotency_key, status, output, error, attempt, completed_at, start_at, started_at, parent_id, data, created_at, tags FROM stepwise.executions');
    const { rows: steps } = await client.query<{
      execution_id: string;
      name: string;
      kind: string;
      completed: boolean;
      outcome: string | null;
      result: { run?: string; execution_id?: string; value?: unknown; attempt?: number; payload?: unknown; slept?: boolean } | null;
      error: { type: string; message: string; retryable: boolean } | null;
      failures: Array<{ attempt: number; error: { type: string; message: string; retryable: boolean }; started_at: string; ended_at: string }> | null;
      wake_at: Date | null;
      started_at: Date;
      completed_at: Date | null;
    }>('SELECT execution_id, name, kind, completed, outcome, result, error, failures, wake_at, started_at, completed_at FROM stepwise.steps');

    // Nothing lost, nothing duplicated: exactly one execution per planned idempotency key, and no other.
    const byKey = new Map<string, (typeof executions)[number][]>();
    let cronFires = 0;
    // Child executions (chaos.fanout's), by their parent: checked against the parent's plan below.
    const childrenByParent = new Map<string, (typeof executions)[number][]>();
    for (const e of executions) {
      if (e.parent_id !== null) {
        childrenByParent.set(e.parent_id, [...(childrenByParent.get(e.parent_id) ?? []), e]);
        continue;
      }
      if (e.task === CRON_TASK) {
        cronFires += 1;
        // One execution per fire time, keyed by it; finished unless it was due as the workers stopped.
        const key = e.start_at ? `cron:${CRON_TASK}:${e.start_at.toISOString()}` : undefined;
        if (e.idempotency_key !== key) violate('cron-key', `${e.id} has key ${e.idempotency_key}, start_at ${e.start_at?.toISOString()}`);
        if (e.start_at && e.start_at.getMilliseconds() !== 0) violate('cron-time', `${e.id} fired for ${e.start_at.toISOString()}, not a whole second`);
        const late = e.start_at !== null && e.start_at.getTime() > workersRan.to - 5000;
        if (e.status !== 'completed' && !late) violate('cron-stuck', `${e.id} (fire time ${e.start_at?.toISOString()}) is ${e.status}`);
        if (e.status === 'completed' && e.output !== CRON_OUTPUT) violate('cron-output', `${e.id} output ${JSON.stringify(e.output)}`);
        continue;
      }
      if (!e.idempotency_key?.startsWith(`${runId}-`)) violate('stray', `execution ${e.id} has no key of this run (${e.idempotency_key})`);
      else byKey.set(e.idempotency_key, [...(byKey.get(e.idempotency_key) ?? []), e]);
    }
    const cronTimes = executions.filter((e) => e.task === CRON_TASK && e.start_at).map((e) => e.start_at!.getTime());
    if (new Set(cronTimes).size !== cronTimes.length) violate('cron-duplicated', `${cronTimes.length - new Set(cronTimes).size} fire times started more than once`);
    const byStatus: Record<string, number> = {};
    let multiAttempt = 0;
    const stepsByExecution = new Map<string, typeof steps>();
    for (const s of steps) stepsByExecution.set(s.execution_id, [...(stepsByExecution.get(s.execution_id) ?? []), s]);
    const plansById = new Map<string, PlannedExecution>();
    const childIds = new Set<string>();

    for (const planned of plans) {
      const found = byKey.get(planned.idempotencyKey) ?? [];
      // A reminder's approval may reach a later round than planned (see verify-races.ts).
      const plan = found[0] ? asLanded(planned, stepsByExecution.get(found[0].id) ?? []) : planned;
      if (found.length === 0) {
        violate('lost', `no execution for ${plan.idempotencyKey} (${plan.kind})`);
        continue;
      }
      if (found.length > 1) violate('duplicated', `${found.length} executions for ${plan.idempotencyKey}`);
      const e = found[0];
      plansById.set(e.id, plan);
      byStatus[e.status] = (byStatus[e.status] ?? 0) + 1;
      if (e.attempt > 1) multiAttempt += 1;
      if (e.task !== plan.task) violate('wrong-task', `${e.id} is ${e.task}, planned ${plan.task}`);
      if (plan.kind === 'delayed') {
        if (!e.start_at) violate('start-at-lost', `${e.id} was scheduled with start_at but has none`);
        else if (e.started_at && e.started_at.getTime() < e.start_at.getTime()) {
          violate('started-early', `${e.id} started ${e.started_at.toISOString()}, before its start_at ${e.start_at.toISOString()}`);
        }
      }
      const expected = expectedOutcome(plan);
      if (!['completed', 'failed', 'cancelled'].includes(e.status)) {
        violate('stuck', `${e.id} (${plan.kind}) is still ${e.status}`);
        continue;
      }
      if (e.status !== expected.status) {
        violate('wrong-status', `${e.id} (${plan.kind}) ended ${e.status}, expected ${expected.status}; error ${JSON.stringify(e.error)}`);
        continue;
      }
      if (expected.status === 'completed' && !isDeepStrictEqual(e.output, expected.output)) {
        violate('wrong-output', `${e.id} (${plan.kind}) output ${JSON.stringify(e.output)}, expected ${JSON.stringify(expected.output)}`);
      }
      if (expected.status === 'failed' && !isDeepStrictEqual(e.error, expected.error)) {
        violate('wrong-error', `${e.id} (${plan.kind}) error ${JSON.stringify(e.error)}, expected ${JSON.stringify(expected.error)}`);
      }
      if (expected.status === 'cancelled' && e.error?.type !== 'cancelled') violate('wrong-error', `${e.id} cancelled with error ${JSON.stringify(e.error)}`);
      const children = childrenByParent.get(e.id) ?? [];
      childrenByParent.delete(e.id);
      if (plan.kind === 'fanout') {
        // Exactly one child per invoke, each run to its own expected end, whatever crashed meanwhile: the
        // parent's child step (found by its name) names it.
        const wants = fanoutChildren(plan);
        if (children.length > wants.length) violate('child-duplicated', `${e.id} has ${children.length} children, planned ${wants.length}`);
        const parentSteps = stepsByExecution.get(e.id) ?? [];
        for (const want of wants) {
          const step = parentSteps.find((s) => s.kind === 'child' && s.name === `child-${want.seq + 1}`);
          const child = children.find((c) => c.id === step?.result?.execution_id);
          if (!child) {
            violate('child-lost', `${e.id} has no child for child-${want.seq + 1}`);
            continue;
          }
          childIds.add(child.id);
          if (child.parent_id !== e.id || child.task !== want.task || !isDeepStrictEqual(child.data, want.data)) violate('child-wrong', `${child.id}: ${child.task} ${JSON.stringify(child.data)} of ${child.parent_id}`);
          if (child.status !== 'completed' || !isDeepStrictEqual(child.output, want.output)) violate('child-outcome', `${child.id} ended ${child.status} with ${JSON.stringify(child.output)}, expected ${JSON.stringify(want.output)}`);
        }
      }
      if (plan.kind === 'fanout-cancel') {
        // Cancelled with it: every child that was started (any of them, as the cancel may come first),
        // none started after the cancel.
        if (children.length > (plan.data.steps ?? 2)) violate('child-duplicated', `${e.id} has ${children.length} children, planned ${plan.data.steps ?? 2}`);
        for (const child of children) {
          childIds.add(child.id);
          if (child.status !== 'cancelled') violate('child-not-cancelled', `${child.id} of cancelled ${e.id} is ${child.status}`);
          else if (child.error?.message !== `its parent execution ${e.id} was cancelled`) violate('child-not-cancelled', `${child.id} cancelled with ${JSON.stringify(child.error)}`);
          if (e.completed_at && child.created_at.getTime() > e.completed_at.getTime()) violate('child-after-cancel', `${child.id} was started after ${e.id} was cancelled`);
        }
      }
      const recorded = stepsByExecution.get(e.id) ?? [];
      if (expected.status !== 'cancelled') {
        const names = recorded.filter((s) => s.kind === 'step' && s.completed).map((s) => s.name).sort();
        const want = expectedSteps(plan).sort();
        if (!isDeepStrictEqual(names, want)) violate('wrong-steps', `${e.id} (${plan.kind}) recorded steps ${names.join(',')}, expected ${want.join(',')}`);
      } else if (e.completed_at) {
        // A cancel is final: nothing is recorded for the execution after it (the cancel itself marks
        // what was open as cancelled).
        for (const s of recorded) {
          if (s.outcome !== 'cancelled' && s.completed_at && s.completed_at.getTime() > e.completed_at.getTime()) violate('recorded-after-cancel', `${e.id} step ${s.name} recorded after the cancel`);
        }
      }
    }

    for (const [parent, found] of childrenByParent) violate('stray-child', `${found.length} child executions of ${parent}, which is no planned parent`);

    // What the driver saw at the end agrees with the database.
    const rowsById = new Map(executions.map((e) => [e.id, e]));
    for (const d of driven) {
      if (d.problem) violate('client', `${d.plan.idempotencyKey} (${d.plan.kind}): ${d.problem}`);
      else if (d.final && d.id) {
        const row = rowsById.get(d.id);
        if (!row || row.status !== d.final.status) violate('client-mismatch', `${d.id}: the client saw ${d.final.status}, the database has ${row?.status}`);
      }
    }

    // No step whose completion was recorded ran again after that: every run of a recorded step started
    // before the record was written (the recorded run, or runs whose worker died or lost its lease
    // before recording), and the recorded result is one of the runs in the log.
    const effects = readSideEffects(effectsDir);
    const runsByStep = new Map<string, EffectLine[]>();
    const startAtById = new Map(executions.filter((e) => e.start_at).map((e) => [e.id, e.start_at!.getTime()]));
    for (const line of effects) {
      if (!plansById.has(line.executionId) && !childIds.has(line.executionId)) {
        violate('stray-effect', `side effect for unknown execution ${line.executionId}`);
        continue;
      }
      const startAt = startAtById.get(line.executionId);
      if (startAt !== undefined && line.at < startAt) violate('started-early', `${line.executionId} ran step ${line.step} at ${new Date(line.at).toISOString()}, before its start_at`);
      const key = `${line.executionId} ${line.step}`;
      runsByStep.set(key, [...(runsByStep.get(key) ?? []), line]);
    }
    let unrecordedReruns = 0;
    let stepRecords = 0;
    const cronIds = new Set(executions.filter((e) => e.task === CRON_TASK).map((e) => e.id));
    for (const s of steps) {
      // The cron task's step has no side effect to log; its executions were checked above.
      if (s.kind !== 'step' || !s.completed || !s.completed_at || cronIds.has(s.execution_id)) continue;
      stepRecords += 1;
      const runs = runsByStep.get(`${s.execution_id} ${s.name}`) ?? [];
      const recordedRun = s.result?.run;
      if (!runs.some((r) => r.run === recordedRun)) violate('phantom-result', `${s.execution_id} step ${s.name}: recorded run ${recordedRun} is not in any side-effect log`);
      const recordedAt = s.completed_at.getTime();
      for (const r of runs) {
        if (r.at > recordedAt) violate('ran-after-recorded', `${s.execution_id} step ${s.name} ran again at ${new Date(r.at).toISOString()} (attempt ${r.attempt}) after its completion was recorded at ${s.completed_at.toISOString()}`);
      }
      unrecordedReruns += Math.max(0, runs.length - 1);
    }

    // Parallel durable operations, and steps with a timeout and retries of their own.
    const linesByStep = new Map<string, EffectLine[]>();
    for (const line of effects) {
      const key = `${line.executionId} ${line.step}`;
      linesByStep.set(key, [...(linesByStep.get(key) ?? []), line]);
      // A timed-out attempt whose signal was not aborted by its StepTimeoutError logs a line starting with '!'.
      if (line.step.startsWith('!')) violate('step-signal', `${line.executionId} attempt ${line.stepAttempt}: ${line.step.slice(1)}`);
    }
    const drivenByKey = new Map(driven.filter(Boolean).map((d) => [d.plan.idempotencyKey, d]));
    const byKind: Verification['counts']['byKind'] = {};
    let stepFailures = 0;
    let stepTimeouts = 0;
    let durableStepRetries = 0;
    let retriedAfterFault = 0;
    const races = newRaceCounts();
    const iso = (d: Date | null | undefined) => d?.toISOString() ?? 'null';
    for (const plan of plans) {
      const e = byKey.get(plan.idempotencyKey)?.[0];
      if (!e) continue;
      const kindCounts = (byKind[plan.kind] ??= {});
      kindCounts[e.status] = (kindCounts[e.status] ?? 0) + 1;
      if (!['completed', 'failed', 'cancelled'].includes(e.status)) continue;
      const recorded = stepsByExecution.get(e.id) ?? [];
      const named = (name: string) => recorded.find((s) => s.name === name);
      if (RACE_KINDS.has(plan.kind)) verifyRace(plan, e, recorded, drivenByKey.get(plan.idempotencyKey), races, violate);

      // A failed step attempt is retried by the step alone: the execution ends on its first attempt,
      // unless a fault (a worker SIGKILL, a PostgreSQL restart) cost it that attempt.
      if (faultWindows && FIRST_ATTEMPT_KINDS.has(plan.kind) && e.attempt > 1) {
        const from = (e.started_at ?? e.created_at).getTime() - 1000;
        const to = e.completed_at?.getTime() ?? Date.now();
        if (faultWindows.some((f) => f.from <= to && f.to >= from)) retriedAfterFault += 1;
        else violate('attempt-without-fault', `${e.id} (${plan.kind}) ended ${e.status} on attempt ${e.attempt}, with no worker SIGKILL or PostgreSQL restart from ${iso(e.started_at)} to ${iso(e.completed_at)}`);
      }

      for (const want of retriedSteps(plan)) {
        const row = named(want.name);
        const exhausted = isExhausted(want);
        // The attempt the last budget ends on, when the budgets run out.
        const lastBudgetEnd = want.attempts * want.budgets;
        if (!row || row.kind !== 'step') {
          violate('retried-step', `${e.id} (${plan.kind}) has no record of step ${want.name}`);
          continue;
        }
        const failures = row.failures ?? [];
        stepFailures += failures.length;
        stepTimeouts += failures.filter((f) => f.error?.type === 'StepTimeoutError').length;
        // Every failed attempt is kept, numbered from 1, once each: a crash re-runs an attempt whose
        // failure was not recorded under the same number.
        const attempts = failures.map((f) => f.attempt);
        const wantAttempts = Array.from({ length: exhausted ? lastBudgetEnd : want.failTimes }, (_, i) => i + 1);
        if (!isDeepStrictEqual(attempts, wantAttempts)) violate('step-failures', `${e.id} (${plan.kind}) step ${want.name} kept failed attempts [${attempts.join(',')}], expected [${wantAttempts.join(',')}]`);
        for (const f of failures) {
          const wantError = { type: want.errorType, message: want.errorMessage(f.attempt), retryable: isRetryableAttempt(want, f.attempt) };
          if (!isDeepStrictEqual(f.error, wantError)) violate('step-failures', `${e.id} (${plan.kind}) step ${want.name} attempt ${f.attempt} failed with ${JSON.stringify(f.error)}, expected ${JSON.stringify(wantError)}`);
          if (!(Date.parse(f.started_at) <= Date.parse(f.ended_at))) violate('step-failures', `${e.id} step ${want.name} attempt ${f.attempt} ended ${f.ended_at} before it started ${f.started_at}`);
        }
        const lines = linesByStep.get(`${e.id} ${want.name}`) ?? [];
        if (exhausted) {
          const wantError = { type: want.errorType, message: want.errorMessage(lastBudgetEnd), retryable: false };
          if (row.completed || row.outcome !== 'failed' || !isDeepStrictEqual(row.error, wantError)) {
            violate('retried-step', `${e.id} (${plan.kind}) step ${want.name}: completed ${row.completed}, outcome ${row.outcome}, error ${JSON.stringify(row.error)}; expected failed with ${JSON.stringify(wantError)}`);
          }
        } else if (!row.completed || row.outcome !== null) {
          violate('retried-step', `${e.id} (${plan.kind}) step ${want.name}: completed ${row.completed}, outcome ${row.outcome}`);
        } else {
          // The recorded result is the successful attempt's: its value, its attempt number, its run.
          const line = lines.find((l) => l.run === row.result?.run);
          if (row.result?.value !== want.value || row.result?.attempt !== want.failTimes + 1 || (line && line.stepAttempt !== want.failTimes + 1)) {
            violate('retried-step-result', `${e.id} (${plan.kind}) step ${want.name} recorded ${JSON.stringify(row.result)} (logged as attempt ${line?.stepAttempt}), expected value ${want.value} of attempt ${want.failTimes + 1}`);
          }
          const last = failures[failures.length - 1];
          if (line && last && line.at - Date.parse(last.ended_at) > 5000) durableStepRetries += 1;
        }
        // No attempt beyond the last that can run, and every failure kept was an attempt that ran.
        const lastAttempt = exhausted ? lastBudgetEnd : want.failTimes + 1;
        for (const l of lines) {
          if (l.stepAttempt === undefined || l.stepAttempt < 1 || l.stepAttempt > lastAttempt) violate('step-attempt-beyond', `${e.id} (${plan.kind}) step ${want.name} ran as attempt ${l.stepAttempt} at ${new Date(l.at).toISOString()}; its last possible attempt is ${lastAttempt}`);
        }
        for (const f of failures) {
          if (!lines.some((l) => l.stepAttempt === f.attempt)) violate('phantom-failure', `${e.id} (${plan.kind}) step ${want.name} kept a failure of attempt ${f.attempt}, which no side-effect log shows running`);
        }
        // And GET …/steps shows the same.
        const seen = drivenByKey.get(plan.idempotencyKey)?.steps;
        if (seen) {
          const api = seen.find((s) => s.name === want.name);
          const apiAttempts = api?.failed_attempts.map((f) => f.attempt);
          if (!api || api.status !== (exhausted ? 'failed' : 'completed') || !isDeepStrictEqual(apiAttempts, attempts)) {
            violate('api-steps', `${e.id} (${plan.kind}) GET …/steps shows ${want.name} ${api?.status} with failed attempts [${apiAttempts?.join(',')}]; the database has [${attempts.join(',')}]`);
          }
        }
      }

      if (e.status !== 'completed') continue;
      if (plan.kind === 'parallel-sleep') {
        // Both sleeps were registered together (their deadlines ms and ms2 from the same instant) and
        // ended no earlier than their deadlines; the step after them ran after both.
        const sleeps = ['p1', 'p2'].map(named);
        const [p1, p2] = sleeps;
        for (const [i, s] of sleeps.entries()) {
          if (!s || s.kind !== 'sleep' || !s.completed || !s.wake_at || !s.completed_at) violate('parallel-sleep', `${e.id} sleep p${i + 1} is ${s ? `${s.kind} completed ${s.completed} wake_at ${iso(s.wake_at)}` : 'not recorded'}`);
          else if (s.completed_at.getTime() < s.wake_at.getTime()) violate('sleep-early', `${e.id} sleep ${s.name} ended ${iso(s.completed_at)}, before its deadline ${iso(s.wake_at)}`);
        }
        if (p1?.wake_at && p2?.wake_at) {
          const apart = p2.wake_at.getTime() - p1.wake_at.getTime();
          const want = (plan.data.ms2 ?? 0) - (plan.data.ms ?? 0);
          if (Math.abs(apart - want) > 50) violate('parallel-sleep', `${e.id} sleeps p1 and p2 end ${apart} ms apart, expected ${want} (registered together)`);
          const latest = Math.max(p1.wake_at.getTime(), p2.wake_at.getTime());
          for (const l of linesByStep.get(`${e.id} after`) ?? []) {
            if (l.at < latest) violate('sleep-early', `${e.id} step after ran at ${new Date(l.at).toISOString()}, before sleep p2's deadline ${new Date(latest).toISOString()}`);
          }
        }
        if (e.started_at && e.completed_at && e.completed_at.getTime() - e.started_at.getTime() < (plan.data.ms2 ?? 0)) {
          violate('sleep-early', `${e.id} completed ${e.completed_at.getTime() - e.started_at.getTime()} ms after it started, under its longer sleep of ${plan.data.ms2} ms`);
        }
      }
      if (plan.kind === 'parallel-events') {
        for (const event of PARALLEL_EVENTS) {
          const s = named(event);
          const payload = parallelEventPayload(plan.data, event);
          if (!s || s.kind !== 'event' || !s.completed || !isDeepStrictEqual(s.result?.payload, payload)) {
            violate('event-payload', `${e.id} wait ${event} recorded ${s ? `${s.kind} completed ${s.completed} ${JSON.stringify(s.result)}` : 'nothing'}, expected payload ${JSON.stringify(payload)}`);
          }
        }
      }
    }
    const operationCounts = await verifyOperations(
      client,
      {
        ...operations,
        plans,
        driven,
        executionOf: (plan) => byKey.get(plan.idempotencyKey)?.[0],
        stepOf: (id, name) => stepsByExecution.get(id)?.find((s) => s.name === name),
        linesOf: (id, step) => linesByStep.get(`${id} ${step}`) ?? [],
      },
      violate,
    );
    return {
      violations,
      violationCounts,
      counts: {
        executions: executions.length,
        byStatus,
        stepRecords,
        sideEffectLines: effects.length,
        unrecordedReruns,
        multiAttempt,
        byKind,
        stepFailures,
        stepTimeouts,
        durableStepRetries,
        retriedAfterFault,
        cronFires,
        cronSeconds: Math.floor((workersRan.to - workersRan.from) / 1000),
        operations: operationCounts,
        races,
      },
    };
  } finally {
    await client.end();
  }
}
