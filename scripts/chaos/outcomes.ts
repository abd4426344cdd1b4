// What `make chaos` schedules, and what each execution must end as: a pure function of its data,
// written independently of the tasks (scripts/chaos/tasks.ts) so that the check is not a tautology.
import { groupBulkRetries, planOperated, type BulkGroupPlan, type RetryMode } from './plan-operate';

export type ChaosKind =
  | 'steps'
  | 'delayed'
  | 'sleep'
  | 'event'
  | 'event-timeout'
  | 'flaky'
  | 'fail'
  | 'exhaust'
  | 'cancel'
  | 'slow'
  | 'limited'
  | 'fanout'
  | 'fanout-cancel'
  | 'parallel-steps'
  | 'parallel-sleep'
  | 'parallel-events'
  | 'step-timeout'
  | 'step-retry'
  | 'retry'
  | 'cancel-retry'
  | 'bulk-retry'
  | 'keyed'
  | 'rated'
  | 'race-event-timer'
  | 'race-timers'
  | 'reminder';

export type ChaosData = {
  n: number;
  steps?: number;
  ms?: number;
  failTimes?: number;
  /** `parallel-sleep`: the longer of its two sleeps (ms is the shorter). */
  ms2?: number;
  /** `parallel-sleep`, `parallel-steps`: how long the side step(s) stay busy. */
  busyMs?: number;
  /** `step-retry`: the retried step's maxAttempts (failTimes >= attempts: its retries run out). */
  attempts?: number;
  /** `step-retry`: the retried step's initialDelay (and maxDelay); past 5 s a backoff waits durably. */
  backoffMs?: number;
  /** `retry`: its step throws NonRetryableError (one attempt per budget) rather than Error. */
  nonRetryable?: boolean;
  /** `keyed`, `rated`: the tenant its task's concurrency or rate limit is kept per (the key `/tenant`). */
  tenant?: string;
  /** `reminder`: the rounds it waits for approval before it gives up (ms is each round's grace). */
  rounds?: number;
};


export interface PlannedExecution {
  index: number;
  kind: ChaosKind;
  task: string;
  data: ChaosData;
  idempotencyKey: string;
  /** For `cancel`: how long after scheduling the driver cancels. */
  cancelAfterMs?: number;
  /** For `delayed`: scheduled with `start_at` this long after the schedule request. */
  startAfterMs?: number;
  /** For `parallel-events`: which event the driver delivers first, and how long before the other. */
  firstEvent?: ParallelEvent;
  deliverGapMs?: number;
  /** For `race-event-timer`: the driver delivers `go` as soon as the execution waits (else never). */
  deliverGo?: boolean;
  /** For `reminder`: the round (from 1) whose open wait the driver delivers `approval` to. */
  approvalRound?: number;
  /** Tags it is scheduled with (`bulk-retry`: its group's). */
  tags?: string[];
  /** For `retry`: the failed runs the operator retries it after (each budget of its step runs out). */
  operatorRounds?: number;
  /** For `retry` (its last round) and `cancel-retry`: one retry, several at once, or one racing a cancel. */
  retryMode?: RetryMode;
  /** For retryMode `concurrent`: how many retries are sent at once (exactly one may win). */
  concurrentRetries?: number;
  /** For `bulk-retry`: the group one POST …/bulk-retry takes (by its tag) once all its members failed. */
  bulkGroup?: BulkGroupPlan;
}


export interface ExpectedOutcome {
  status: 'completed' | 'failed' | 'cancelled';
  output?: unknown;
  error?: { type: string; message: string; retryable: false };
}

/** A small seeded PRNG (mulberry32): the same seed plans the same run. */
export function createRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The weights add up to 114, as before the parallel, step-retry, operator, flow-control and race kinds
// came: they took their share from the older kinds, so a run's load (and --short's time) stays about the
// same. The flow-control kinds also come in bursts (see FLOW_BURSTS), which take the place of others.
const MIX: ReadonlyArray<readonly [ChaosKind, number]> = [
  ['steps', 6],
  ['delayed', 5],
  ['sleep', 5],
  ['event', 5],
  ['event-timeout', 3],
  ['flaky', 5],
  ['fail', 4],
  ['exhaust', 3],
  ['cancel', 5],
  ['slow', 5],
  ['limited', 5],
  ['fanout', 5],
  ['fanout-cancel', 3],
  ['parallel-steps', 5],
  ['parallel-sleep', 5],
  ['parallel-events', 6],
  ['step-timeout', 5],
  ['step-retry', 6],
  ['retry', 5],
  ['cancel-retry', 3],
  ['bulk-retry', 3],
  ['keyed', 3],
  ['rated', 2],
  ['race-event-timer', 4],
  ['race-timers', 3],
  ['reminder', 5],
];

const TASKS: Record<ChaosKind, string> = {
  steps: 'chaos.steps',
  delayed: 'chaos.steps',
  sleep: 'chaos.sleep',
  event: 'chaos.event',
  'event-timeout': 'chaos.event-timeout',
  flaky: 'chaos.flaky',
  fail: 'chaos.fail',
  exhaust: 'chaos.exhaust',
  cancel: 'chaos.cancel',
  slow: 'chaos.slow',
  limited: 'chaos.limited',
  fanout: 'chaos.fanout',
  'fanout-cancel': 'chaos.fanout-cancel',
  'parallel-steps': 'chaos.parallel-steps',
  'parallel-sleep': 'chaos.parallel-sleep',
  'parallel-events': 'chaos.parallel-events',
  'step-timeout': 'chaos.step-timeout',
  'step-retry': 'chaos.step-retry',
  retry: 'chaos.retry',
  'cancel-retry': 'chaos.event',
  'bulk-retry': 'chaos.retry',
  keyed: 'chaos.keyed',
  rated: 'chaos.rated',
  'race-event-timer': 'chaos.race-event-timer',
  'race-timers': 'chaos.race-timers',
  reminder: 'chaos.reminder',
};

/** The concurrency limit of `chaos.limited` (scripts/chaos/tasks.ts), which the run samples. */
export const LIMITED_TASK = 'chaos.limited';
export const LIMIT = 3;

/**
 * `chaos.keyed` runs at most KEYED_LIMIT executions at once per tenant (concurrency key `/tenant`);
 * `chaos.rated` starts at most RATE_LIMIT attempts per tenant in any window of RATE_PERIOD_MS (rate key
 * `/tenant`). Both as scripts/chaos/tasks.ts declares them; verify-flow.ts checks them after the run.
 */
export const KEYED_TASK = 'chaos.keyed';
export const KEYED_LIMIT = 2;
export const RATED_TASK = 'chaos.rated';
export const RATE_LIMIT = 5;
export const RATE_PERIOD_MS = 1000;

/**
 * Runs of consecutive plans of one flow-control kind, at these fractions of the plan: the driver's
 * flows take consecutive plans at about the same time, so a burst's executions are due together and
 * the limits hold them back (the mix alone schedules them too slowly to reach a limit). Each is
 * BURST_SHARE of the plan, between 20 and 40 executions; none in plans under MIN_BURST_PLAN.
 */
const FLOW_BURSTS: ReadonlyArray<readonly [number, ChaosKind]> = [
  [0.12, 'rated'],
  [0.2, 'keyed'],
  [0.42, 'rated'],
  [0.55, 'keyed'],
  [0.78, 'rated'],
  [0.85, 'keyed'],
];
const BURST_SHARE = 0.02;
const MIN_BURST_PLAN = 200;

/** The flow-control kind a burst puts at `index`, if any. */
function burstKind(index: number, count: number): ChaosKind | undefined {
  if (count < MIN_BURST_PLAN) return undefined;
  const size = Math.max(20, Math.min(40, Math.round(count * BURST_SHARE)));
  const burst = FLOW_BURSTS.find(([at]) => index >= Math.floor(count * at) && index < Math.floor(count * at) + size);
  return burst?.[1];
}

/** Tenants of the flow-control kinds, skewed: the first has about half of the executions. */
function tenant(prefix: string, others: number, random: () => number): string {
  const r = random();
  return r < 0.5 ? `${prefix}0` : `${prefix}${1 + Math.min(others - 1, Math.floor(((r - 0.5) / 0.5) * others))}`;
}

/** Plans `count` executions of the mix, deterministically from `seed`. */
export function planExecutions(count: number, seed: number, runId: string): PlannedExecution[] {
  const random = createRandom(seed);
  const total = MIX.reduce((s, [, w]) => s + w, 0);
  const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
  const plans = Array.from({ length: count }, (_, index): PlannedExecution => {
    let pick = random() * total;
    const kind = burstKind(index, count) ?? (MIX.find(([, w]) => (pick -= w) < 0) ?? MIX[0])[0];
    const data: ChaosData = { n: int(1, 1_000_000) };
    let cancelAfterMs: number | undefined;
    let startAfterMs: number | undefined;
    if (kind === 'steps') data.steps = int(2, 6);
    if (kind === 'delayed') {
      data.steps = int(2, 4);
      startAfterMs = int(100, 2000);
    }
    if (kind === 'sleep') data.ms = int(200, 1500);
    if (kind === 'event-timeout') data.ms = int(300, 1500);
    if (kind === 'flaky') data.failTimes = int(1, 2);
    if (kind === 'slow') data.ms = int(200, 800);
    if (kind === 'limited') data.ms = int(20, 150);
    if (kind === 'keyed') {
      data.tenant = tenant('k', 4, random);
      data.ms = int(50, 250);
    }
    if (kind === 'rated') {
      data.tenant = tenant('r', 2, random);
      data.ms = int(50, 300);
    }
    if (kind === 'fanout') data.steps = int(2, 4);
    if (kind === 'fanout-cancel') {
      data.steps = int(2, 4);
      cancelAfterMs = int(0, 1500);
    }
    if (kind === 'cancel') {
      data.ms = int(0, 400);
      cancelAfterMs = int(0, 1500);
    }
    if (kind === 'parallel-steps') {
      data.steps = int(2, 4);
      data.busyMs = int(0, 300);
    }
    if (kind === 'parallel-sleep') {
      data.ms = int(100, 600);
      data.ms2 = data.ms + int(200, 900);
      data.busyMs = int(0, 300);
    }
    let firstEvent: ParallelEvent | undefined;
    let deliverGapMs: number | undefined;
    if (kind === 'parallel-events') {
      firstEvent = random() < 0.5 ? 'left' : 'right';
      deliverGapMs = random() < 0.3 ? 0 : int(1, 600);
    }
    if (kind === 'step-timeout') data.failTimes = int(1, 2);
    if (kind === 'step-retry') {
      // A few early ones back off 3.5-7 s, mostly past the worker's inline limit (5 s), so they wait
      // durably as a sleep does (not late in the plan, which would lengthen the run); one in five runs
      // out of retries (StepFailedError).
      const durable = random() < 0.15 && index < count * 0.6;
      data.backoffMs = durable ? 7000 : int(20, 80);
      data.failTimes = durable ? 1 : int(1, 3);
      data.attempts = random() < 0.2 ? data.failTimes : data.failTimes + int(1, 2);
    }
    let deliverGo: boolean | undefined;
    if (kind === 'race-event-timer') {
      // Delivered: the timer is far off (the event wins well before it, whatever faults delay the
      // delivery); not delivered: the timer wins at its time, long before the wait's minute.
      deliverGo = random() < 0.5;
      data.ms = deliverGo ? int(RACE_FAR_MS, RACE_FAR_MS + 10000) : int(300, 1500);
    }
    if (kind === 'race-timers') {
      data.ms = int(200, 1000);
      data.ms2 = int(RACE_FAR_MS, RACE_FAR_MS + 10000);
    }
    let approvalRound: number | undefined;
    if (kind === 'reminder') {
      // Rounds long enough for the driver, polling through a loaded API, to find the planned one open.
      data.ms = int(1500, 2500);
      data.rounds = REMINDER_ROUNDS;
      approvalRound = int(1, 3);
    }
    const operated = planOperated(kind, data, random, int);
    return { index, kind, task: TASKS[kind], data, idempotencyKey: `${runId}-${index}`, cancelAfterMs, startAfterMs, firstEvent, deliverGapMs, deliverGo, approvalRound, ...operated };
  });
  groupBulkRetries(plans, runId);
  return plans;
}


/** The payload the driver delivers to a `chaos.event` execution. */
export const eventPayload = (data: ChaosData) => ({ v: data.n * 7 });

/** The two events a `chaos.parallel-events` execution waits for at once. */
export type ParallelEvent = 'left' | 'right';
export const PARALLEL_EVENTS: readonly ParallelEvent[] = ['left', 'right'];
/** The payload the driver delivers to a `chaos.parallel-events` execution for each of them. */
export const parallelEventPayload = (data: ChaosData, event: ParallelEvent) => (event === 'left' ? { v: data.n * 3 } : { v: data.n * 5 });

/** A race's branch that must lose: a timer at least this far off (ms), well past any fault's delay. */
export const RACE_FAR_MS = 20000;

/** The payload the driver delivers to a `chaos.race-event-timer` execution as `go`. */
export const goPayload = (data: ChaosData) => ({ v: data.n * 7 });

/**
 * `chaos.reminder` waits up to this many rounds: far more than the driver needs to reach its round
 * (3 at most), so that a delivery held up by a fault still finds an open round.
 */
export const REMINDER_ROUNDS = 10;
/** The payload the driver delivers to a `chaos.reminder` execution as `approval`. */
export const approvalPayload = (data: ChaosData) => ({ ok: data.n * 19 });
/** The history's names of the r-th wait, sleep or step of one name (the engine counts repeats). */
export const nthName = (name: string, r: number) => (r === 1 ? name : `${name}#${r}`);

/** `chaos.step-timeout`: its step's timeout; attempts up to failTimes sleep STEP_TIMEOUT_SLEEP_MS, past it. */
export const STEP_TIMEOUT_MS = 150;
export const STEP_TIMEOUT_SLEEP_MS = 400;

/**
 * The steps of a kind that retries a step of its own (see tasks.ts): each fails its first `failTimes`
 * attempts (step attempts, counted by the engine from the failures it recorded: a crash never changes
 * them) and succeeds on the next, or fails for good when `attempts` run out. Its recorded result is
 * { value, attempt, run }, the successful attempt's.
 */
export interface RetriedStep {
  name: string;
  /** Attempts that fail, from 1. */
  failTimes: number;
  /** Attempts per budget: the step's own policy's, or 1 for a NonRetryableError. */
  attempts: number;
  /** Budgets it gets: 1, and one more per operator retry after its budget ran out. */
  budgets: number;
  value: number;
  errorType: string;
  errorMessage: (attempt: number) => string;
}

/** Whether the failure of `attempt` left the step more attempts in its budget. */
export function isRetryableAttempt(want: RetriedStep, attempt: number): boolean {
  return want.errorType !== 'NonRetryableError' && ((attempt - 1) % want.attempts) + 1 < want.attempts;
}

/** Whether its budgets run out before an attempt succeeds (the execution fails with StepFailedError). */
export const isExhausted = (want: RetriedStep): boolean => want.failTimes >= want.attempts * want.budgets;

export function retriedSteps(p: PlannedExecution): RetriedStep[] {
  const { n } = p.data;
  if (p.kind === 'step-timeout') {
    return [{ name: 't1', failTimes: p.data.failTimes ?? 1, attempts: 6, budgets: 1, value: n * 11, errorType: 'StepTimeoutError', errorMessage: () => `step "t1" timed out after ${STEP_TIMEOUT_MS} ms` }];
  }
  if (p.kind === 'step-retry') {
    return [{ name: 'r1', failTimes: p.data.failTimes ?? 1, attempts: p.data.attempts ?? 4, budgets: 1, value: n * 13, errorType: 'Error', errorMessage: (a) => `r1 ${n} attempt ${a}` }];
  }
  if (p.kind === 'retry' || p.kind === 'bulk-retry') {
    const attempts = p.data.nonRetryable ? 1 : (p.data.attempts ?? 1);
    const errorType = p.data.nonRetryable ? 'NonRetryableError' : 'Error';
    return [{ name: 'gate', failTimes: p.data.failTimes ?? 1, attempts, budgets: 1 + (p.operatorRounds ?? 1), value: n * 17, errorType, errorMessage: (a) => `gate ${n} attempt ${a}` }];
  }
  return [];
}

/** Kinds an operator retries (see operate.ts): the driver hands them to its Operator. */
export const OPERATOR_KINDS: ReadonlySet<ChaosKind> = new Set(['retry', 'cancel-retry', 'bulk-retry']);

/** Kinds that must complete (or fail) on their first execution attempt unless a fault (a worker SIGKILL, a PostgreSQL restart) came meanwhile. */
export const FIRST_ATTEMPT_KINDS: ReadonlySet<ChaosKind> = new Set(['step-timeout', 'step-retry', 'parallel-steps', 'parallel-sleep', 'parallel-events']);

/** How the execution must end. */
export function expectedOutcome(p: PlannedExecution): ExpectedOutcome {
  const { n } = p.data;
  switch (p.kind) {
    case 'steps':
    case 'delayed': {
      let sum = 0;
      for (let i = 1; i <= (p.data.steps ?? 3); i++) sum += n * i;
      return { status: 'completed', output: { n, sum } };
    }
    case 'sleep':
      return { status: 'completed', output: { n, a: n, b: n + 1 } };
    case 'event':
      return { status: 'completed', output: { n, v: n * 7, after: n * 7 + 1 } };
    case 'event-timeout':
      return { status: 'completed', output: { n, timedOut: true, after: n } };
    case 'flaky':
      return { status: 'completed', output: { n, after: n * 2 } };
    case 'fail':
      return { status: 'failed', error: { type: 'NonRetryableError', message: `bad input ${n}`, retryable: false } };
    case 'exhaust':
      return { status: 'failed', error: { type: 'Error', message: `always ${n}`, retryable: false } };
    case 'cancel':
    case 'fanout-cancel':
      return { status: 'cancelled' };
    case 'slow':
    case 'limited':
      return { status: 'completed', output: { n, b: n + 1 } };
    case 'fanout':
      return { status: 'completed', output: { n, total: fanoutChildren(p).reduce((s, c) => s + c.output.sum, 0) } };
    case 'parallel-steps': {
      // p1..pk return n * i; the chain c1 -> c2 returns n + 1; `after` adds them all up.
      let sum = 0;
      for (let i = 1; i <= (p.data.steps ?? 3); i++) sum += n * i;
      return { status: 'completed', output: { n, sum, chain: n + 1, after: sum + n + 1 } };
    }
    case 'parallel-sleep':
      return { status: 'completed', output: { n, beside: n * 3, after: n * 3 + 1 } };
    case 'parallel-events':
      return { status: 'completed', output: { n, left: n * 3, right: n * 5, after: n * 8 + 1 } };
    case 'step-timeout':
      return { status: 'completed', output: { n, t: n * 11, after: n * 11 + 1 } };
    case 'step-retry': {
      const [r1] = retriedSteps(p);
      if (isExhausted(r1)) {
        return { status: 'failed', error: { type: 'StepFailedError', message: `step "r1" failed: ${r1.errorMessage(r1.attempts)}`, retryable: false } };
      }
      return { status: 'completed', output: { n, r: r1.value, after: r1.value + n } };
    }
    case 'retry':
    case 'bulk-retry':
      // Completed in the end: the operator retried it after each failure.
      return { status: 'completed', output: { n, gate: n * 17, after: n * 17 + 1 } };
    case 'cancel-retry':
      return { status: 'completed', output: { n, v: n * 7, after: n * 7 + 1 } };
    case 'keyed':
      return { status: 'completed', output: { n, tenant: p.data.tenant, b: n + 1 } };
    case 'rated':
      return { status: 'completed', output: { n, tenant: p.data.tenant, v: n * 5 } };
    case 'race-event-timer':
      return { status: 'completed', output: p.deliverGo ? { n, winner: 'go', v: n * 7 } : { n, winner: 'timer' } };
    case 'race-timers':
      return { status: 'completed', output: { n, winner: 'short' } };
    case 'reminder':
      return { status: 'completed', output: { n, approved: approvalPayload(p.data), round: p.approvalRound ?? 1 } };
  }
}

/**
 * The error each failed run of an operator kind ended with, in order (its attempts' list shows them):
 * the step's last failure of each budget but the last.
 */
export function operatorFailures(p: PlannedExecution): Array<{ type: string; message: string }> {
  const [gate] = retriedSteps(p);
  if (!gate) return [];
  return Array.from({ length: gate.budgets - 1 }, (_, i) => ({ type: 'StepFailedError', message: `step "gate" failed: ${gate.errorMessage((i + 1) * gate.attempts)}` }));
}

/**
 * The children a `chaos.fanout` execution starts, one per position, each a `chaos.steps` of two steps
 * on data n * 10 + i: their keys, data and outputs.
 */
export function fanoutChildren(p: PlannedExecution): Array<{ seq: number; task: string; data: ChaosData; output: { n: number; sum: number } }> {
  return Array.from({ length: p.data.steps ?? 2 }, (_, i) => {
    const n = p.data.n * 10 + i + 1;
    return { seq: i, task: 'chaos.steps', data: { n, steps: 2 }, output: { n, sum: n + 2 * n } };
  });
}

/** Steps (ctx.step names) an execution that ran to its end must have recorded. */
export function expectedSteps(p: PlannedExecution): string[] {
  switch (p.kind) {
    case 'steps':
    case 'delayed':
      return Array.from({ length: p.data.steps ?? 3 }, (_, i) => `s${i + 1}`);
    case 'sleep':
    case 'event':
    case 'flaky':
      return ['before', 'after'];
    case 'event-timeout':
      return ['after'];
    case 'fail':
    case 'exhaust':
      return ['before'];
    case 'cancel':
    case 'fanout-cancel':
      return [];
    case 'slow':
    case 'limited':
    case 'keyed':
      return ['one', 'two'];
    case 'rated':
      return ['hit'];
    case 'fanout':
      return [];
    case 'parallel-steps':
      return [...Array.from({ length: p.data.steps ?? 3 }, (_, i) => `p${i + 1}`), 'c1', 'c2', 'after'];
    case 'parallel-sleep':
      return ['beside', 'after'];
    case 'parallel-events':
      return ['before', 'after'];
    case 'step-timeout':
      return ['before', 't1', 'after'];
    case 'step-retry': {
      const [r1] = retriedSteps(p);
      return isExhausted(r1) ? ['before'] : ['before', 'r1', 'after'];
    }
    case 'retry':
    case 'bulk-retry':
      return ['before', 'gate', 'after'];
    case 'cancel-retry':
      return ['before', 'after'];
    case 'race-event-timer':
    case 'race-timers':
      return [];
    case 'reminder':
      // One `remind` per round that passed without an approval.
      return Array.from({ length: (p.approvalRound ?? 1) - 1 }, (_, i) => nthName('remind', i + 1));
  }
}

/** Kinds that race durable operations (Promise.race): verify.ts checks their winners and closed losers. */
export const RACE_KINDS: ReadonlySet<ChaosKind> = new Set(['race-event-timer', 'race-timers', 'reminder']);

/** The cron task every chaos worker serves (see scripts/chaos/tasks.ts): it fires every second. */
export const CRON_TASK = 'chaos.tick';
/** What each of its executions returns. */
export const CRON_OUTPUT = 'tick';
