// What `make chaos` schedules, and what each execution must end as: a pure function of its data,
// written independently of the tasks (scripts/chaos/tasks.ts) so that the check is not a tautology.

export type ChaosKind = 'steps' | 'delayed' | 'sleep' | 'event' | 'event-timeout' | 'flaky' | 'fail' | 'exhaust' | 'cancel' | 'slow' | 'limited' | 'fanout' | 'fanout-cancel';

export type ChaosData = {
  n: number;
  steps?: number;
  ms?: number;
  failTimes?: number;
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

const MIX: ReadonlyArray<readonly [ChaosKind, number]> = [
  ['steps', 20],
  ['delayed', 6],
  ['sleep', 12],
  ['event', 15],
  ['event-timeout', 5],
  ['flaky', 12],
  ['fail', 6],
  ['exhaust', 4],
  ['cancel', 10],
  ['slow', 10],
  ['limited', 5],
  ['fanout', 6],
  ['fanout-cancel', 3],
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
};

/** The concurrency limit of `chaos.limited` (scripts/chaos/tasks.ts), which the run samples. */
export const LIMITED_TASK = 'chaos.limited';
export const LIMIT = 3;

/** Plans `count` executions of the mix, deterministically from `seed`. */
export function planExecutions(count: number, seed: number, runId: string): PlannedExecution[] {
  const random = createRandom(seed);
  const total = MIX.reduce((s, [, w]) => s + w, 0);
  const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
  return Array.from({ length: count }, (_, index) => {
    let pick = random() * total;
    const kind = (MIX.find(([, w]) => (pick -= w) < 0) ?? MIX[0])[0];
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
    if (kind === 'fanout') data.steps = int(2, 4);
    if (kind === 'fanout-cancel') {
      data.steps = int(2, 4);
      cancelAfterMs = int(0, 1500);
    }
    if (kind === 'cancel') {
      data.ms = int(0, 400);
      cancelAfterMs = int(0, 1500);
    }
    return { index, kind, task: TASKS[kind], data, idempotencyKey: `${runId}-${index}`, cancelAfterMs, startAfterMs };
  });
}

/** The payload the driver delivers to a `chaos.event` execution. */
export const eventPayload = (data: ChaosData) => ({ v: data.n * 7 });

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
  }
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
      return ['one', 'two'];
    case 'fanout':
      return [];
  }
}

/** The cron task every chaos worker serves (see scripts/chaos/tasks.ts): it fires every second. */
export const CRON_TASK = 'chaos.tick';
/** What each of its executions returns. */
export const CRON_OUTPUT = 'tick';
