// The tasks `make chaos` runs in its worker processes. Every step appends one line to a side-effect log
// outside the database (one file per worker process), `executionId step attempt timeMs run [stepAttempt]`,
// and returns its `run` id, so the check can tell which run's result was recorded and whether a step ran
// again after its completion was recorded. Every outcome follows from the execution's data alone (see
// outcomes.ts). This module imports nothing of the chaos scripts (it is compiled on its own for a run).
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { defineTask, EventTimeoutError, NonRetryableError, Type, type Static, type TaskContext } from 'stepwise-workflows';

/** What the side-effect helpers need of a ctx (any task's, whatever events it declares). */
type StepContext = Pick<TaskContext, 'executionId' | 'attempt' | 'step'>;

let fd: number | undefined;

/**
 * Appends one line synchronously: it is in the file before the step's result can be recorded. Steps
 * with a retry policy of their own also log the step's attempt (fn's `attempt`).
 */
function logEffect(ctx: StepContext, step: string, stepAttempt?: number): string {
  if (fd === undefined) {
    const dir = process.env.CHAOS_EFFECTS_DIR;
    if (!dir) throw new Error('CHAOS_EFFECTS_DIR is not set');
    mkdirSync(dir, { recursive: true });
    fd = openSync(path.join(dir, `worker-${process.pid}.log`), 'a');
    process.once('exit', () => closeSync(fd as number));
  }
  const run = randomBytes(6).toString('hex');
  writeSync(fd, `${ctx.executionId} ${step} ${ctx.attempt} ${Date.now()} ${run}${stepAttempt === undefined ? '' : ` ${stepAttempt}`}\n`);
  return run;
}

/** A step with a side effect; its recorded result carries the id of the run that produced it. */
async function effect<T>(ctx: StepContext, name: string, value: T, busyMs = 0): Promise<T> {
  // T is JSON here (the chaos data): its stored form is itself.
  const recorded = (await ctx.step(name, async () => {
    const run = logEffect(ctx, name);
    if (busyMs > 0) await new Promise((r) => setTimeout(r, busyMs));
    return { value, run };
  })) as unknown as { value: T; run: string };
  return recorded.value;
}

const Data = Type.Object({
  n: Type.Integer(),
  steps: Type.Optional(Type.Integer()),
  ms: Type.Optional(Type.Integer()),
  failTimes: Type.Optional(Type.Integer()),
  ms2: Type.Optional(Type.Integer()),
  busyMs: Type.Optional(Type.Integer()),
  attempts: Type.Optional(Type.Integer()),
  backoffMs: Type.Optional(Type.Integer()),
  nonRetryable: Type.Optional(Type.Boolean()),
  rounds: Type.Optional(Type.Integer()),
});
const fastRetry = { initialDelay: '100ms', maxDelay: '500ms' } as const;

/** Straight-line steps: output { n, sum } with sum = n * (1 + ... + steps). */
export const steps = defineTask({
  name: 'chaos.steps',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    let sum = 0;
    for (let i = 1; i <= (data.steps ?? 3); i++) sum += await effect(ctx, `s${i}`, data.n * i);
    return { n: data.n, sum };
  },
});

/** A durable sleep between two steps. */
export const sleeper = defineTask({
  name: 'chaos.sleep',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    const a = await effect(ctx, 'before', data.n);
    await ctx.sleep('nap', data.ms ?? 500);
    const b = await effect(ctx, 'after', data.n + 1);
    return { n: data.n, a, b };
  },
});

/** Waits for the event `go`, which the chaos driver delivers over HTTP with payload { v: n * 7 }. */
export const eventWaiter = defineTask({
  name: 'chaos.event',
  data: Data,
  events: { go: Type.Object({ v: Type.Integer() }) },
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    await effect(ctx, 'before', data.n);
    const payload = await ctx.waitForEvent('go', { timeout: '10m' });
    const after = await effect(ctx, 'after', payload.v + 1);
    return { n: data.n, v: payload.v, after };
  },
});

/** Waits for an event nobody sends, with a short timeout, and catches the timeout. */
export const eventTimeout = defineTask({
  name: 'chaos.event-timeout',
  data: Data,
  events: { never: Type.Null() },
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    try {
      await ctx.waitForEvent('never', { timeout: data.ms ?? 1000 });
      throw new NonRetryableError('an event nobody sends arrived');
    } catch (err) {
      if (!(err instanceof EventTimeoutError)) throw err;
    }
    const after = await effect(ctx, 'after', data.n);
    return { n: data.n, timedOut: true, after };
  },
});

/** Fails its first `failTimes` attempts after a step, then completes: retries replay the step. */
export const flaky = defineTask({
  name: 'chaos.flaky',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    const before = await effect(ctx, 'before', data.n);
    if (ctx.attempt <= (data.failTimes ?? 1)) throw new Error(`flaky ${data.n} attempt ${ctx.attempt}`);
    const after = await effect(ctx, 'after', before * 2);
    return { n: data.n, after };
  },
});

/** Fails at once with NonRetryableError after one step. */
export const fails = defineTask({
  name: 'chaos.fail',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    await effect(ctx, 'before', data.n);
    throw new NonRetryableError(`bad input ${data.n}`);
  },
});

/** Fails every attempt until its retries run out. */
export const exhausts = defineTask({
  name: 'chaos.exhaust',
  data: Data,
  retry: { maxAttempts: 2, ...fastRetry },
  async run(ctx, data) {
    await effect(ctx, 'before', data.n);
    throw new Error(`always ${data.n}`);
  },
});

/** Never ends by itself: the chaos driver cancels it over HTTP. */
export const cancellable = defineTask({
  name: 'chaos.cancel',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    await effect(ctx, 'before', data.n, data.ms ?? 0);
    await ctx.waitForEvent('never-sent');
    await effect(ctx, 'after', data.n);
    throw new NonRetryableError('a cancelled execution went on');
  },
});

/** Two steps of `data.ms` each: output { n, b } with b = n + 1. */
async function twoSlowSteps(ctx: StepContext, data: Static<typeof Data>) {
  const a = await effect(ctx, 'one', data.n, data.ms ?? 300);
  const b = await effect(ctx, 'two', a + 1, data.ms ?? 300);
  return { n: data.n, b };
}

/** Slow steps, so that workers are often killed in the middle of one. */
export const slow = defineTask({
  name: 'chaos.slow',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  run: twoSlowSteps,
});

/** Like chaos.slow, but at most three run at once over both workers (the run samples that). */
export const limited = defineTask({
  name: 'chaos.limited',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  concurrency: { limit: 3 },
  run: twoSlowSteps,
});

const TenantData = Type.Object({ n: Type.Integer(), tenant: Type.String(), ms: Type.Optional(Type.Integer()) });

/**
 * Like chaos.slow, but at most two run at once per tenant over both workers (`concurrency` keyed by
 * `/tenant`). Each run of the handler logs `~enter` when it starts and `~exit` just before it returns
 * (lines of no step), so that the check can tell which runs were inside the handler at the same time.
 */
export const keyed = defineTask({
  name: 'chaos.keyed',
  data: TenantData,
  retry: { maxAttempts: 50, ...fastRetry },
  concurrency: { limit: 2, key: '/tenant' },
  async run(ctx, data) {
    logEffect(ctx, '~enter');
    const { b } = await twoSlowSteps(ctx, { n: data.n, ms: data.ms });
    logEffect(ctx, '~exit');
    return { n: data.n, tenant: data.tenant, b };
  },
});

/**
 * One step, busy for `data.ms`; at most five attempts (first ones, retries, takeovers) start per tenant
 * in any second (`rateLimit` keyed by `/tenant`).
 */
export const rated = defineTask({
  name: 'chaos.rated',
  data: TenantData,
  retry: { maxAttempts: 50, ...fastRetry },
  rateLimit: { limit: 5, period: '1s', key: '/tenant' },
  async run(ctx, data) {
    const v = await effect(ctx, 'hit', data.n * 5, data.ms ?? 20);
    return { n: data.n, tenant: data.tenant, v };
  },
});

/** Fans out to `steps` children of chaos.steps at once, and sums their sums: output { n, total }. */
export const fanout = defineTask({
  name: 'chaos.fanout',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    const children = Array.from({ length: data.steps ?? 2 }, (_, i) => ctx.invoke(`child-${i + 1}`, steps, { n: data.n * 10 + i + 1, steps: 2 }));
    const sums = await Promise.all(children);
    return { n: data.n, total: sums.reduce((s, c) => s + c.sum, 0) };
  },
});

/** Invokes `steps` children that wait for an event nobody sends: the chaos driver cancels the parent. */
export const fanoutCancel = defineTask({
  name: 'chaos.fanout-cancel',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    await Promise.all(Array.from({ length: data.steps ?? 2 }, (_, i) => ctx.invoke(`child-${i + 1}`, cancellable, { n: data.n * 10 + i + 1 })));
    throw new NonRetryableError('a fan-out whose children never end went on');
  },
});

/**
 * Steps in parallel: p1..pk (Promise.all, each busy for its own time) beside a chain c1 -> c2, then
 * `after`: output { n, sum, chain, after } with sum = n * (1 + ... + k), chain = n + 1.
 */
export const parallelSteps = defineTask({
  name: 'chaos.parallel-steps',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    const busy = data.busyMs ?? 0;
    const branches = Array.from({ length: data.steps ?? 3 }, (_, i) => effect(ctx, `p${i + 1}`, data.n * (i + 1), Math.round((busy * ((i + 1) % 3)) / 2)));
    const chain = (async () => effect(ctx, 'c2', (await effect(ctx, 'c1', data.n, Math.round(busy / 3))) + 1, Math.round(busy / 3)))();
    const [values, c] = await Promise.all([Promise.all(branches), chain]);
    const sum = values.reduce((a, b) => a + b, 0);
    const after = await effect(ctx, 'after', sum + c);
    return { n: data.n, sum, chain: c, after };
  },
});

/** Two sleeps (ms and the longer ms2) and a step at once, then a step: output { n, beside: 3n, after: 3n + 1 }. */
export const parallelSleep = defineTask({
  name: 'chaos.parallel-sleep',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    const [, , beside] = await Promise.all([ctx.sleep('p1', data.ms ?? 200), ctx.sleep('p2', data.ms2 ?? 500), effect(ctx, 'beside', data.n * 3, data.busyMs ?? 0)]);
    const after = await effect(ctx, 'after', beside + 1);
    return { n: data.n, beside, after };
  },
});

/** Waits for `left` and `right` at once (the driver delivers both, { v: 3n } and { v: 5n }), then a step. */
export const parallelEvents = defineTask({
  name: 'chaos.parallel-events',
  data: Data,
  events: { left: Type.Object({ v: Type.Integer() }), right: Type.Object({ v: Type.Integer() }) },
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    await effect(ctx, 'before', data.n);
    const [left, right] = await Promise.all([ctx.waitForEvent('left', { timeout: '10m' }), ctx.waitForEvent('right', { timeout: '10m' })]);
    const after = await effect(ctx, 'after', left.v + right.v + 1);
    return { n: data.n, left: left.v, right: right.v, after };
  },
});

/**
 * Step `t1` has a 150 ms timeout: its attempts up to `failTimes` sleep 400 ms, past it (and then log a
 * marker line, starting with '!', if their signal was not aborted by a StepTimeoutError), and the next
 * one returns at once. Its result is { value: 11n, attempt, run }; output { n, t: 11n, after: 11n + 1 }.
 */
export const stepTimeout = defineTask({
  name: 'chaos.step-timeout',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    await effect(ctx, 'before', data.n);
    const t = await ctx.step(
      't1',
      async ({ attempt, signal }) => {
        const run = logEffect(ctx, 't1', attempt);
        if (attempt <= (data.failTimes ?? 1)) {
          await new Promise((r) => setTimeout(r, 400));
          const reason = (signal.reason as Error | undefined)?.name;
          if (!signal.aborted || reason !== 'StepTimeoutError') logEffect(ctx, `!t1-signal-${signal.aborted ? `aborted-by-${reason}` : 'not-aborted'}`, attempt);
        }
        return { value: data.n * 11, attempt, run };
      },
      { timeout: 150, retry: { maxAttempts: 6, initialDelay: '20ms', maxDelay: '100ms' } },
    );
    const after = await effect(ctx, 'after', t.value + 1);
    return { n: data.n, t: t.value, after };
  },
});

/**
 * Step `r1` throws on its first `failTimes` attempts and returns { value: 13n, attempt, run } on the
 * next, retried by its own policy (`attempts`, a fixed `backoffMs`); when its attempts run out the
 * execution fails with StepFailedError. Output { n, r: 13n, after: 14n }.
 */
export const stepRetry = defineTask({
  name: 'chaos.step-retry',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    await effect(ctx, 'before', data.n);
    const backoff = data.backoffMs ?? 50;
    const r = await ctx.step(
      'r1',
      ({ attempt }) => {
        const run = logEffect(ctx, 'r1', attempt);
        if (attempt <= (data.failTimes ?? 1)) throw new Error(`r1 ${data.n} attempt ${attempt}`);
        return { value: data.n * 13, attempt, run };
      },
      { retry: { maxAttempts: data.attempts ?? 4, initialDelay: backoff, maxDelay: backoff } },
    );
    const after = await effect(ctx, 'after', r.value + data.n);
    return { n: data.n, r: r.value, after };
  },
});

/**
 * Fails until an operator retries it, as often as planned: step `gate` throws on its attempts up to
 * `failTimes`, Error under a policy of `attempts` (or NonRetryableError, which ends a budget at once),
 * so each budget ends the execution with StepFailedError. The engine numbers a step's attempts from the
 * failures it recorded, across operator retries and whatever crashed, so the attempt that succeeds is
 * failTimes + 1. Its result is { value: 17n, attempt, run }; output { n, gate: 17n, after: 17n + 1 }.
 */
export const operatorRetry = defineTask({
  name: 'chaos.retry',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    await effect(ctx, 'before', data.n);
    const gate = await ctx.step(
      'gate',
      ({ attempt }) => {
        const run = logEffect(ctx, 'gate', attempt);
        const message = `gate ${data.n} attempt ${attempt}`;
        if (attempt <= (data.failTimes ?? 1)) throw data.nonRetryable ? new NonRetryableError(message) : new Error(message);
        return { value: data.n * 17, attempt, run };
      },
      { retry: { maxAttempts: data.attempts ?? 1, initialDelay: 20, maxDelay: 20 } },
    );
    const after = await effect(ctx, 'after', gate.value + 1);
    return { n: data.n, gate: gate.value, after };
  },
});

/**
 * An event wait (a minute's timeout) raced against a sleep of `ms`: whichever fired first wins on every
 * replay. Output { n, winner: 'go', v } when the driver delivered `go` ({ v: 7n }) first, else
 * { n, winner: 'timer' }; the losing branch is closed when the handler ends.
 */
export const raceEventTimer = defineTask({
  name: 'chaos.race-event-timer',
  data: Data,
  events: { go: Type.Object({ v: Type.Integer() }) },
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    const won = await Promise.race([
      ctx.waitForEvent('go', { timeout: '1m' }).then((p) => ({ winner: 'go', v: p.v })),
      ctx.sleep('timer', data.ms ?? 500).then(() => ({ winner: 'timer' })),
    ]);
    return { n: data.n, ...won };
  },
});

/** Two sleeps raced, `long` (ms2) and the much shorter `short` (ms): output { n, winner: 'short' }. */
export const raceTimers = defineTask({
  name: 'chaos.race-timers',
  data: Data,
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    const winner = await Promise.race([ctx.sleep('long', data.ms2 ?? 30000).then(() => 'long'), ctx.sleep('short', data.ms ?? 300).then(() => 'short')]);
    return { n: data.n, winner };
  },
});

/**
 * Up to `rounds` rounds of an `approval` wait raced against a `grace` sleep of `ms`, with a step
 * `remind` after each round that passed: output { n, approved: payload, round } for the round whose
 * wait the approval reached. Each round's wait closes the one before it. The engine names the r-th
 * `remind` `remind#r` (r > 1); its side-effect line carries that name, so the check pairs them.
 */
export const reminder = defineTask({
  name: 'chaos.reminder',
  data: Data,
  events: { approval: Type.Object({ ok: Type.Integer() }) },
  retry: { maxAttempts: 50, ...fastRetry },
  async run(ctx, data) {
    for (let round = 1; round <= (data.rounds ?? 3); round++) {
      const answer = await Promise.race([ctx.waitForEvent('approval').then((payload) => ({ payload })), ctx.sleep('grace', data.ms ?? 1000).then(() => null)]);
      if (answer) return { n: data.n, approved: answer.payload, round };
      const logged = round === 1 ? 'remind' : `remind#${round}`;
      await ctx.step('remind', () => ({ value: round, run: logEffect(ctx, logged) }));
    }
    throw new NonRetryableError(`no approval in ${data.rounds} rounds`);
  },
});

/** Fired every second by every worker (they are killed and restarted all along): one execution per second at most. */
export const tick = defineTask({
  name: 'chaos.tick',
  cron: '* * * * * *',
  async run(ctx) {
    return ctx.step('tick', () => 'tick');
  },
});
