// Durable semantics without surprises (issue #17): one test per row of the table, against a
// real worker and API server.
import { defineTask, NonRetryableError, Type } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { getExecution } from '../../src/store/executions';
import { loadSteps } from '../../src/store/steps';
import { queryRows } from '../../src/store/db';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

let api: TestApi;
let worker: Worker;
const counts = new Map<string, number>();
const bump = (key: string) => {
  const n = (counts.get(key) ?? 0) + 1;
  counts.set(key, n);
  return n;
};
const seen = new Map<string, unknown>();
const JSON_HEADERS = { 'Content-Type': 'application/json' };

const parallelSleeps = defineTask({
  name: 'ds-parallel-sleeps',
  async run(ctx) {
    await Promise.all([ctx.sleep('a', 400), ctx.sleep('b', 1000)]);
    return 'awake';
  },
});

const twoEvents = defineTask({
  name: 'ds-two-events',
  async run(ctx) {
    const [x, y] = await Promise.all([ctx.waitForEvent('x'), ctx.waitForEvent('y')]);
    return { x, y };
  },
});

const stepBesideSleep = defineTask({
  name: 'ds-step-beside-sleep',
  async run(ctx) {
    const [value] = await Promise.all([
      ctx.step('work', async () => {
        bump(`work:${ctx.executionId}`);
        await new Promise((r) => setTimeout(r, 300));
        return 7;
      }),
      ctx.sleep('nap', 100),
    ]);
    return value;
  },
});

const neverReturns = defineTask({
  name: 'ds-never-returns',
  timeout: 500,
  async run(ctx) {
    await ctx.step('hang', () => new Promise(() => undefined));
    return 'unreachable';
  },
});

const hangsUntilCancelled = defineTask({
  name: 'ds-hangs',
  async run(ctx) {
    ctx.signal.addEventListener('abort', () => seen.set(`reason:${ctx.executionId}`, ctx.signal.reason));
    await ctx.step('hang', () => new Promise(() => undefined));
    return 'unreachable';
  },
});

const stepTimeout = defineTask({
  name: 'ds-step-timeout',
  async run(ctx) {
    return ctx.step(
      'slow-then-fast',
      async ({ attempt, signal }) => {
        bump(`timeout:${ctx.executionId}`);
        if (attempt === 1) {
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
          seen.set(`aborted:${ctx.executionId}`, signal.reason);
          return 'late';
        }
        return `attempt ${attempt}`;
      },
      { timeout: 200, retry: { maxAttempts: 3, initialDelay: 10, maxDelay: 10 } },
    );
  },
});

const fiveFlakySteps = defineTask({
  name: 'ds-five-flaky-steps',
  retry: { maxAttempts: 2, initialDelay: 10, maxDelay: 20 },
  async run(ctx) {
    const out: number[] = [];
    for (let i = 0; i < 5; i++) {
      out.push(
        await ctx.step(`s${i}`, ({ attempt }) => {
          if (attempt === 1) throw new Error(`s${i} fails once`);
          return i;
        }),
      );
    }
    return out;
  },
});

const values = defineTask({
  name: 'ds-values',
  async run(ctx) {
    const at = await ctx.step('date', () => new Date('2024-10-30T12:00:00.000Z'));
    seen.set(`date:${ctx.executionId}`, at);
    class Money {
      constructor(readonly cents: number) {}
    }
    const money = await ctx.step('class', () => new Money(5));
    seen.set(`money:${ctx.executionId}`, money);
    return { at, money };
  },
});

const lossy = defineTask({
  name: 'ds-lossy',
  async run(ctx) {
    return ctx.step('map', () => new Map([['a', 1]]));
  },
});

const eventWithTimeout = defineTask({
  name: 'ds-event-timeout',
  async run(ctx) {
    try {
      return await ctx.waitForEvent('late', { timeout: 300 });
    } catch (err) {
      return { timedOut: (err as Error).name };
    }
  },
});

const hugeSleep = defineTask({
  name: 'ds-huge-sleep',
  async run(ctx) {
    try {
      await ctx.sleep('forever', Number.MAX_SAFE_INTEGER);
      return 'slept';
    } catch (err) {
      return { error: (err as Error).name };
    }
  },
});

const throwsObject = defineTask({
  name: 'ds-throws-object',
  retry: { maxAttempts: 1 },
  async run() {
    throw { code: 'E42', status: 503, message: 'upstream said no' };
  },
});

const throwsHugeMessage = defineTask({
  name: 'ds-throws-huge',
  retry: { maxAttempts: 1 },
  async run() {
    throw new Error('x'.repeat(1_000_000));
  },
});

const failingStep = defineTask({
  name: 'ds-failing-step',
  async run(ctx) {
    await ctx.step('doomed', () => {
      throw new NonRetryableError('no way');
    });
  },
});

const cancelledSleep = defineTask({
  name: 'ds-cancelled-sleep',
  async run(ctx) {
    await ctx.sleep('long', '1h');
  },
});

const failingChild = defineTask({
  name: 'ds-failing-child',
  retry: { maxAttempts: 1 },
  async run() {
    throw new Error('child says no');
  },
});

const parentOfFailure = defineTask({
  name: 'ds-parent-of-failure',
  retry: { maxAttempts: 3, initialDelay: 10, maxDelay: 10 },
  async run(ctx) {
    bump(`parent:${ctx.executionId}`);
    await ctx.invoke('child', failingChild, {});
  },
});

const tasks = [
  parallelSleeps, twoEvents, stepBesideSleep, neverReturns, hangsUntilCancelled, stepTimeout, fiveFlakySteps, values, lossy,
  eventWithTimeout, hugeSleep, throwsObject, throwsHugeMessage, failingStep, cancelledSleep, failingChild, parentOfFailure,
];

beforeAll(async () => {
  api = await startTestApi();
  worker = await startWorker(api.t, tasks as never, { pollIntervalMs: 100, shutdownGraceMs: 200 });
});
afterAll(async () => {
  await worker.stop();
  await api.close();
});

async function run(task: string, data: Record<string, unknown> = {}) {
  const { execution_id } = await api.client.schedule(task, data);
  return execution_id;
}

const finished = (id: string, deadlineMs = 15_000) => api.client.wait(id, { deadlineMs });

describe('parallel durable operations', () => {
  test('two sleeps in Promise.all are registered together: their timers run side by side', async () => {
    const id = await run(parallelSleeps.name);
    await waitUntil(async () => (await loadSteps(api.db, id)).length === 2, 'both sleeps recorded');
    const [a, b] = await loadSteps(api.db, id);
    // Both deadlines from the same moment: 600 ms apart, not 1000 (b's would start when a woke).
    const apart = (b.wakeAt as Date).getTime() - (a.wakeAt as Date).getTime();
    expect(apart).toBeGreaterThanOrEqual(550);
    expect(apart).toBeLessThan(900);
    expect(await finished(id)).toMatchObject({ status: 'completed', output: 'awake', steps_completed: 2 });
  });

  test('two event waits in Promise.all are both open; each delivery answers 200 and the handler gets both', async () => {
    const id = await run(twoEvents.name);
    const waiting = await waitUntil(async () => {
      const e = await api.client.get(id);
      return e.waiting_for_events.length === 2 ? e : undefined;
    }, 'both waits open');
    expect(waiting.waiting_for_events.map((w) => w.event_name).sort()).toEqual(['x', 'y']);
    expect(waiting.waiting_for_event?.event_name).toBe(waiting.waiting_for_events[0].event_name);
    const first = await api.call('POST', `/api/v1/events/${id}/x`, { headers: JSON_HEADERS, body: '1' });
    expect(first.status).toBe(200);
    // The second delivery may find the execution resumed and waiting again: retry until it waits.
    await waitUntil(async () => (await api.call('POST', `/api/v1/events/${id}/y`, { headers: JSON_HEADERS, body: '2' })).status === 200, 'y delivered');
    expect(await finished(id)).toMatchObject({ status: 'completed', output: { x: 1, y: 2 } });
  });

  test('a step beside a sleep runs once and is recorded before the execution suspends', async () => {
    const id = await run(stepBesideSleep.name);
    expect(await finished(id)).toMatchObject({ status: 'completed', output: 7 });
    expect(counts.get(`work:${id}`)).toBe(1);
    const steps = await loadSteps(api.db, id);
    expect(steps.map((s) => [s.name, s.kind, s.completed])).toEqual([
      ['work', 'step', true],
      ['nap', 'sleep', true],
    ]);
  });
});

describe('timeouts and stopped handlers', () => {
  test("a handler that never returns fails at its task's timeout, and its slot is free at once", async () => {
    const id = await run(neverReturns.name);
    const done = await finished(id);
    expect(done).toMatchObject({ status: 'failed', error: { type: 'ExecutionTimeoutError', retryable: false } });
    await waitUntil(() => worker.busy === 0, 'the slot to be free');
  });

  test('a cancelled handler frees its slot at once, and its signal says it was cancelled', async () => {
    const id = await run(hangsUntilCancelled.name);
    await waitUntil(async () => (await getExecution(api.db, id))?.status === 'running', 'running');
    await waitUntil(() => worker.busy === 1, 'held');
    await api.client.cancel(id);
    await waitUntil(() => worker.busy === 0, 'the slot to be free while the handler still hangs');
    expect(seen.get(`reason:${id}`)).toMatchObject({ name: 'ExecutionCancelledError' });
  });

  test('a step attempt past its timeout fails with StepTimeoutError, its signal aborts, and the step is retried', async () => {
    const id = await run(stepTimeout.name);
    expect(await finished(id)).toMatchObject({ status: 'completed', output: 'attempt 2' });
    expect(seen.get(`aborted:${id}`)).toMatchObject({ name: 'StepTimeoutError' });
    const [step] = await api.client.listSteps(id);
    expect(step.failed_attempts).toEqual([expect.objectContaining({ attempt: 1, error: expect.objectContaining({ type: 'StepTimeoutError' }) })]);
  });
});

describe('retries per step', () => {
  test('five steps that each fail once complete: each step is retried alone, and the execution stays on its first attempt', async () => {
    const id = await run(fiveFlakySteps.name);
    expect(await finished(id)).toMatchObject({ status: 'completed', attempt: 1, output: [0, 1, 2, 3, 4] });
    const steps = await api.client.listSteps(id);
    expect(steps.map((s) => [s.name, s.status, s.failed_attempts.length])).toEqual([0, 1, 2, 3, 4].map((i) => [`s${i}`, 'completed', 1]));
  });

  test('a failed step is in /steps with its error', async () => {
    const id = await run(failingStep.name);
    expect(await finished(id)).toMatchObject({ status: 'failed', error: { type: 'StepFailedError', retryable: false } });
    const [step] = await api.client.listSteps(id);
    expect(step).toMatchObject({ name: 'doomed', status: 'failed', error: { type: 'NonRetryableError', message: 'no way' } });
  });

  test("a child's failure read back from history is not retried for nothing", async () => {
    const id = await run(parentOfFailure.name);
    expect(await finished(id)).toMatchObject({ status: 'failed', attempt: 1, error: { type: 'ChildExecutionError', retryable: false } });
  });
});

describe('faithful values', () => {
  test('the first run of a step gets what a replay gets: a Date is its ISO string, a class instance its JSON form', async () => {
    const id = await run(values.name);
    const done = await finished(id);
    expect(done.output).toEqual({ at: '2024-10-30T12:00:00.000Z', money: { cents: 5 } });
    expect(seen.get(`date:${id}`)).toBe('2024-10-30T12:00:00.000Z');
    expect(Object.getPrototypeOf(seen.get(`money:${id}`))).toBe(Object.prototype);
  });

  test('a step returning a Map fails without retries, naming the step', async () => {
    const id = await run(lossy.name);
    const done = await finished(id);
    expect(done).toMatchObject({ status: 'failed', error: { type: 'StepFailedError', retryable: false } });
    expect(done.error?.message).toMatch(/step "map"/);
    expect(done.error?.message).toMatch(/Map/);
  });
});

describe('deadlines hold', () => {
  test('an event delivered after its timeout, before any worker woke the execution, is 409 and the handler sees the timeout', async () => {
    await worker.stop();
    const id = await run(eventWithTimeout.name);
    const solo = await startWorker(api.t, [eventWithTimeout] as never, { pollIntervalMs: 100 });
    await waitUntil(async () => (await getExecution(api.db, id))?.status === 'waiting', 'waiting');
    await solo.stop();
    const [{ timeout_at }] = await queryRows<{ timeout_at: Date }>(api.db, "SELECT wake_at AS timeout_at FROM stepwise.steps WHERE execution_id = ? AND kind = 'event'", [id]);
    await new Promise((r) => setTimeout(r, Math.max(0, timeout_at.getTime() - Date.now()) + 100));
    const late = await api.call('POST', `/api/v1/events/${id}/late`, { headers: JSON_HEADERS, body: '{"on":"time?"}' });
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({ error: { code: 'not_waiting_for_event' } });
    worker = await startWorker(api.t, tasks as never, { pollIntervalMs: 100, shutdownGraceMs: 200 });
    expect(await finished(id)).toMatchObject({ status: 'completed', output: { timedOut: 'EventTimeoutError' } });
  });
});

describe('limits and errors that read true', () => {
  test('a sleep past the year 9999 is a RangeError at the call, and /steps answers', async () => {
    const id = await run(hugeSleep.name);
    expect(await finished(id)).toMatchObject({ status: 'completed', output: { error: 'RangeError' } });
    expect((await api.call('GET', `/api/v1/executions/${id}/steps`)).status).toBe(200);
  });

  test('a thrown plain object keeps its fields', async () => {
    const id = await run(throwsObject.name);
    const done = await finished(id);
    expect(done.error?.message).toContain('upstream said no');
    expect(done.error?.message).toContain('E42');
    expect(done.error?.message).toContain('503');
  });

  test('a message cut to the limit says that it was cut', async () => {
    const id = await run(throwsHugeMessage.name);
    const done = await finished(id);
    expect((done.error?.message ?? '').length).toBeLessThan(5000);
    expect(done.error?.message).toMatch(/cut/);
  });

  test('a cancelled sleep shows as cancelled in /steps', async () => {
    const id = await run(cancelledSleep.name);
    await waitUntil(async () => (await getExecution(api.db, id))?.status === 'waiting', 'sleeping');
    await api.client.cancel(id);
    const [nap] = await api.client.listSteps(id);
    expect(nap).toMatchObject({ name: 'long', kind: 'sleep', status: 'cancelled' });
  });
});

describe('configured limits', () => {
  const manySteps = defineTask({
    name: 'ds-many-steps',
    async run(ctx) {
      for (let i = 0; i < 5; i++) await ctx.step('s', () => i);
      return 'done';
    },
  });
  const bigResult = defineTask({
    name: 'ds-big-result',
    async run(ctx) {
      return ctx.step('big', () => 'x'.repeat(200));
    },
  });
  const bigOutput = defineTask({
    name: 'ds-big-output',
    async run() {
      return 'y'.repeat(200);
    },
  });

  test('an execution past its operations limit, a step result or an output past the size limit fail with a message naming them', async () => {
    const limited = await startWorker(api.t, [manySteps, bigResult, bigOutput] as never, { pollIntervalMs: 100, limits: { operations: 3, valueBytes: 100 } });
    try {
      const many = await finished(await run(manySteps.name));
      expect(many).toMatchObject({ status: 'failed', steps_completed: 3, error: { type: 'NonRetryableError', retryable: false } });
      expect(many.error?.message).toMatch(/limit of 3 durable operations/);
      const big = await finished(await run(bigResult.name));
      expect(big).toMatchObject({ status: 'failed', error: { type: 'StepFailedError' } });
      expect(big.error?.message).toMatch(/step "big".*100/);
      const output = await finished(await run(bigOutput.name));
      expect(output).toMatchObject({ status: 'failed', error: { type: 'NonRetryableError' } });
      expect(output.error?.message).toMatch(/return value.*100/);
    } finally {
      await limited.stop();
    }
  });
});

describe('resuming in place', () => {
  const entries = new Map<string, number>();
  const sleeper = defineTask({
    name: 'ds-resume-in-place',
    async run(ctx) {
      entries.set(ctx.executionId, (entries.get(ctx.executionId) ?? 0) + 1);
      const before = await ctx.step('before', () => 'b');
      await Promise.all([ctx.sleep('nap', 500), ctx.waitForEvent('poke')]);
      const after = await ctx.step('after', () => 'a');
      return before + after;
    },
  });

  test.each([
    ['keeps the suspended handler and resumes it where it paused', 256, 1],
    ['with keepSuspended 0 replays the handler from its history on every wake-up', 0, 3],
  ])('a worker that %s', async (_what, keepSuspended, runs) => {
    const solo = await startWorker(api.t, [sleeper] as never, { pollIntervalMs: 50, keepSuspended });
    try {
      const id = await run(sleeper.name);
      await waitUntil(async () => (await api.client.get(id)).waiting_for_events.length === 1, 'waiting for the poke');
      await waitUntil(async () => (await api.call('POST', `/api/v1/events/${id}/poke`, { headers: JSON_HEADERS, body: 'null' })).status === 200, 'poke delivered');
      expect(await finished(id)).toMatchObject({ status: 'completed', output: 'ba', steps_completed: 4 });
      expect(entries.get(id)).toBe(runs);
    } finally {
      await solo.stop();
    }
  });
});
