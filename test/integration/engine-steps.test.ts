import { defineTask, NonRetryableError, Type, EventTimeoutError } from '../../src/index';
import { getExecution, insertExecutions, deliverEvent } from '../../src/store/executions';
import { cancelExecution } from '../../src/store/transitions/cancel';
import { loadSteps } from '../../src/store/steps';
import type { Worker } from '../../src/engine/worker';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

let t: TestDatabase;
let worker: Worker;
const sideEffects = new Map<string, number>();
const bump = (key: string) => sideEffects.set(key, (sideEffects.get(key) ?? 0) + 1);
const gates = new Map<string, () => void>();
const gate = (key: string) => new Promise<void>((resolve) => gates.set(key, resolve));

const memo = defineTask({
  name: 'memo',
  data: Type.Object({ key: Type.String(), failTimes: Type.Integer() }),
  retry: { maxAttempts: 5, initialDelay: 10, maxDelay: 50 },
  async run(ctx, data) {
    const a = await ctx.step('first', () => {
      bump(`${data.key}:first`);
      return { value: 41 };
    });
    if (ctx.attempt <= data.failTimes) throw new Error(`boom on attempt ${ctx.attempt}`);
    const b = await ctx.step('second', () => {
      bump(`${data.key}:second`);
      return a.value + 1;
    });
    return { answer: b };
  },
});

const loop = defineTask({
  name: 'loop',
  async run(ctx) {
    const out: number[] = [];
    for (let i = 0; i < 3; i++) out.push(await ctx.step('item', () => i * 10));
    return out;
  },
});

const slowStep = defineTask({
  name: 'slow-step',
  async run(ctx) {
    await ctx.step('slow', () => new Promise((r) => setTimeout(() => r('done'), 150)));
    return 'ok';
  },
});

const fatal = defineTask({
  name: 'fatal',
  retry: { maxAttempts: 5, initialDelay: 10 },
  async run(ctx) {
    bump(`fatal:${ctx.executionId}`);
    throw new NonRetryableError('card declined');
  },
});

const flaky = defineTask({
  name: 'flaky-always',
  retry: { maxAttempts: 3, initialDelay: 10, maxDelay: 20 },
  async run() {
    throw new Error('still broken');
  },
});

const sleeper = defineTask({
  name: 'sleeper',
  data: Type.Object({ ms: Type.Integer(), until: Type.Optional(Type.String()) }),
  async run(ctx, data) {
    const t0 = Date.now();
    if (data.until) await ctx.sleepUntil('until', data.until);
    else await ctx.sleep('nap', data.ms);
    return ctx.step('after', () => Date.now() - t0 >= 0);
  },
});

const approval = defineTask({
  name: 'approval',
  events: { decision: Type.Object({ approved: Type.Boolean() }) },
  async run(ctx) {
    try {
      const d = await ctx.waitForEvent('decision', { timeout: '2s' });
      return { approved: d.approved };
    } catch (err) {
      if (err instanceof EventTimeoutError) return { approved: false, timedOut: true };
      throw err;
    }
  },
});

const blocker = defineTask({
  name: 'blocker',
  async run(ctx) {
    await ctx.step('block', async () => {
      await gate(ctx.executionId);
      if (ctx.signal.aborted) throw new Error('aborted');
      return 1;
    });
    return 'done';
  },
});

async function schedule(task: string, data: unknown) {
  const [r] = await insertExecutions(t.db, [{ task, data }]);
  return r.execution.id;
}

async function finished(id: string) {
  return waitUntil(async () => {
    const e = await getExecution(t.db, id);
    return e && ['completed', 'failed', 'cancelled'].includes(e.status) ? e : undefined;
  }, `execution ${id} to finish`);
}

beforeAll(async () => {
  t = await createTestDatabase();
  worker = await startWorker(t, [memo, loop, slowStep, fatal, flaky, sleeper, approval, blocker] as never);
});
afterAll(async () => {
  await worker.stop();
  await t.drop();
});

describe('durable steps', () => {
  test('a step runs once even when the attempt fails after it and is retried', async () => {
    const id = await schedule('memo', { key: 'm1', failTimes: 2 });
    const e = await finished(id);
    expect(e.status).toBe('completed');
    expect(e.output).toEqual({ answer: 42 });
    expect(e.attempt).toBe(3);
    expect(sideEffects.get('m1:first')).toBe(1);
    expect(sideEffects.get('m1:second')).toBe(1);
    expect(e.stepsCompleted).toBe(2);
  });

  test('a step name used again in a loop is numbered in call order', async () => {
    const id = await schedule('loop', null);
    const e = await finished(id);
    expect(e.output).toEqual([0, 10, 20]);
    const steps = await loadSteps(t.db, id);
    expect(steps.map((s) => s.name)).toEqual(['item', 'item#2', 'item#3']);
  });

  test("a step's history row spans from when its function started to when its result committed", async () => {
    const id = await schedule('slow-step', null);
    await finished(id);
    const [step] = await loadSteps(t.db, id);
    expect(step.completedAt!.getTime() - step.startedAt.getTime()).toBeGreaterThanOrEqual(140);
  });

  test('NonRetryableError fails the execution at once', async () => {
    const id = await schedule('fatal', null);
    const e = await finished(id);
    expect(e.status).toBe('failed');
    expect(e.attempt).toBe(1);
    expect(e.error).toEqual({ type: 'NonRetryableError', message: 'card declined', retryable: false });
    expect(sideEffects.get(`fatal:${id}`)).toBe(1);
  });

  test('retries stop after maxAttempts and the execution fails', async () => {
    const id = await schedule('flaky-always', null);
    const e = await finished(id);
    expect(e.status).toBe('failed');
    expect(e.attempt).toBe(3);
    expect(e.error).toMatchObject({ type: 'Error', message: 'still broken', retryable: false });
  });
});

describe('durable pauses', () => {
  test('sleep turns the execution waiting, then any worker resumes it', async () => {
    const id = await schedule('sleeper', { ms: 600 });
    const waiting = await waitUntil(async () => {
      const e = await getExecution(t.db, id);
      return e?.status === 'waiting' ? e : undefined;
    }, 'waiting');
    expect(waiting.currentStep).toBe('nap');
    expect(waiting.waitEventName).toBeNull();
    const e = await finished(id);
    expect(e.status).toBe('completed');
    expect(e.stepsCompleted).toBe(2);
    const steps = await loadSteps(t.db, id);
    expect(steps.map((s) => [s.kind, s.name, s.completed])).toEqual([
      ['sleep', 'nap', true],
      ['step', 'after', true],
    ]);
    // Never early: 600 ms after the handler called sleep, which came after the execution was created
    // (the sleep's row itself may be written later, when a loaded worker gets to it).
    expect(steps[0].wakeAt!.getTime() - e.createdAt.getTime()).toBeGreaterThanOrEqual(600);
    expect(e.completedAt!.getTime()).toBeGreaterThanOrEqual(steps[0].wakeAt!.getTime());
  });

  test('sleepUntil wakes at the given instant', async () => {
    const until = new Date(Date.now() + 400).toISOString();
    const id = await schedule('sleeper', { ms: 0, until });
    const e = await finished(id);
    expect(e.status).toBe('completed');
    expect(e.completedAt!.getTime()).toBeGreaterThanOrEqual(new Date(until).getTime());
  });

  test('waitForEvent returns the delivered payload', async () => {
    const id = await schedule('approval', null);
    const waiting = await waitUntil(async () => {
      const e = await getExecution(t.db, id);
      return e?.status === 'waiting' ? e : undefined;
    }, 'waiting for event');
    expect(waiting.openWaits).toEqual([{ eventName: 'decision', since: expect.any(Date), timeoutAt: expect.any(Date) }]);
    const outcome = await deliverEvent(t.db, id, 'decision', { approved: true });
    expect(outcome.kind).toBe('delivered');
    const e = await finished(id);
    expect(e.output).toEqual({ approved: true });
    expect(e.stepsCompleted).toBe(1);
  });

  test('waitForEvent throws EventTimeoutError after its timeout', async () => {
    const id = await schedule('approval', null);
    const e = await finished(id);
    expect(e.output).toEqual({ approved: false, timedOut: true });
  });
});

describe('cancel', () => {
  test('cancel of a running execution aborts ctx.signal and discards its late result', async () => {
    const id = await schedule('blocker', null);
    await waitUntil(() => gates.has(id), 'step to start');
    await waitUntil(async () => (await getExecution(t.db, id))?.currentStep === 'block', 'current_step');
    expect((await cancelExecution(t.db, id)).kind).toBe('cancelled');
    gates.get(id)!();
    await waitUntil(() => worker.busy === 0, 'slot freed');
    const e = await getExecution(t.db, id);
    expect(e?.status).toBe('cancelled');
    expect(e?.output).toBeNull();
    expect(await loadSteps(t.db, id)).toEqual([]);
  });

  test('cancel of a sleeping execution ends it; it never resumes', async () => {
    const id = await schedule('sleeper', { ms: 300 });
    await waitUntil(async () => (await getExecution(t.db, id))?.status === 'waiting', 'waiting');
    expect((await cancelExecution(t.db, id)).kind).toBe('cancelled');
    // A sleeper scheduled later with the same nap finishing proves the first one's wake time passed.
    const later = await schedule('sleeper', { ms: 300 });
    expect((await finished(later)).status).toBe('completed');
    expect((await getExecution(t.db, id))?.status).toBe('cancelled');
    expect((await loadSteps(t.db, id)).filter((s) => s.completed)).toEqual([]);
  });
});
