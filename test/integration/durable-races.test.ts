// Durable semantics, part 2 (issue #33): races, abandoned waits, steps left running and replays that
// meet another history. Every case runs replayed from the history (keepSuspended 0: as after a restart
// or on another worker) and, where it differs, resumed in place.
import { defineTask, NonRetryableError } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { loadSteps } from '../../src/store/steps';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

let api: TestApi;
const JSON_HEADERS = { 'Content-Type': 'application/json' };
const runs = new Map<string, number>();
const bump = (key: string) => runs.set(key, (runs.get(key) ?? 0) + 1);

beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

async function finished(id: string, timeoutMs = 15000) {
  return waitUntil(async () => {
    const e = await api.client.get(id);
    return ['completed', 'failed', 'cancelled'].includes(e.status) ? e : undefined;
  }, `execution ${id} to finish`, timeoutMs);
}

async function withWorkers<T>(tasks: unknown[], keepSuspended: number, count: number, fn: () => Promise<T>): Promise<T> {
  const workers: Worker[] = [];
  for (let i = 0; i < count; i++) workers.push(await startWorker(api.t, tasks as never, { pollIntervalMs: 100, keepSuspended }));
  try {
    return await fn();
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }
}

const eventOrTimer = defineTask({
  name: 'race-event-or-timer',
  async run(ctx) {
    return Promise.race([ctx.waitForEvent('go', { timeout: '1m' }).then(() => 'go'), ctx.sleep('timer', 600).then(() => 'timer')]);
  },
});

const longOrShort = defineTask({
  name: 'race-long-or-short',
  async run(ctx) {
    return Promise.race([ctx.sleep('long', 20_000).then(() => 'long'), ctx.sleep('short', 600).then(() => 'short')]);
  },
});

const winnerKept = defineTask({
  name: 'race-winner-kept',
  async run(ctx) {
    const winner = await Promise.race([ctx.waitForEvent('go').then(() => 'go'), ctx.sleep('timer', 300).then(() => 'timer')]);
    await ctx.waitForEvent('next');
    return winner;
  },
});

const reminders = defineTask({
  name: 'race-reminder-loop',
  async run(ctx) {
    for (let round = 1; round <= 5; round++) {
      const answer = await Promise.race([
        ctx.waitForEvent('approval').then((payload) => ({ payload })),
        ctx.sleep('grace', 700).then(() => null),
      ]);
      if (answer) return { approved: answer.payload, round };
      await ctx.step('remind', () => round);
    }
    return 'gaveUp';
  },
});

describe('races resolve by the first branch on every path', () => {
  test.each([
    ['replayed from the history', 0, 1],
    ['replayed by either of two workers', 0, 2],
    ['resumed in place', 256, 1],
  ])('an event wait against a timer: the timer wins at its time, %s', async (_how, keep, count) => {
    await withWorkers([eventOrTimer, longOrShort], keep, count, async () => {
      const started = Date.now();
      const { execution_id: id } = await api.client.schedule(eventOrTimer.name);
      expect(await finished(id, 10_000)).toMatchObject({ status: 'completed', output: 'timer' });
      // Well before the event wait's minute: the handler went on when the timer fired.
      expect(Date.now() - started).toBeLessThan(10_000);
      const steps = (await loadSteps(api.db, id)).map((s) => [s.name, s.completed, s.outcome]);
      expect(steps).toEqual([
        ['go', false, 'cancelled'],
        ['timer', true, null],
      ]);
    });
  });

  test.each([
    ['replayed from the history', 0],
    ['resumed in place', 256],
  ])('two timers: the shorter wins at its time, %s', async (_how, keep) => {
    await withWorkers([eventOrTimer, longOrShort], keep, 1, async () => {
      const { execution_id: id } = await api.client.schedule(longOrShort.name);
      expect(await finished(id, 10_000)).toMatchObject({ status: 'completed', output: 'short' });
    });
  });

  test('a later replay, once both branches are over, still gives the branch that fired first', async () => {
    await withWorkers([winnerKept], 0, 1, async () => {
      const { execution_id: id } = await api.client.schedule(winnerKept.name);
      await waitUntil(async () => (await api.client.get(id)).waiting_for_events.some((w) => w.event_name === 'next'), 'waiting for next');
      // The losing branch is still open (the handler may yet await it): a delivery completes it.
      expect((await api.call('POST', `/api/v1/events/${id}/go`, { headers: JSON_HEADERS, body: '1' })).status).toBe(200);
      await waitUntil(async () => (await api.call('POST', `/api/v1/events/${id}/next`, { headers: JSON_HEADERS, body: '2' })).status === 200, 'next delivered');
      expect(await finished(id)).toMatchObject({ status: 'completed', output: 'timer' });
    });
  });
});

describe('an acknowledged event is never dropped', () => {
  test.each([
    ['replayed from the history', 0],
    ['resumed in place', 256],
  ])('an approval in the third round of a reminder loop reaches the open wait, %s', async (_how, keep) => {
    await withWorkers([reminders], keep, 1, async () => {
      const { execution_id: id } = await api.client.schedule(reminders.name);
      await waitUntil(async () => (await loadSteps(api.db, id)).some((s) => s.name === 'remind#2' && s.completed), 'round 3', 15_000);
      await waitUntil(async () => (await api.client.get(id)).status === 'waiting', 'waiting in round 3');
      const delivery = await api.call('POST', `/api/v1/events/${id}/approval`, { headers: JSON_HEADERS, body: '"yes"' });
      expect(delivery.status).toBe(200);
      expect(await finished(id)).toMatchObject({ status: 'completed', output: { approved: 'yes', round: 3 } });
      const waits = (await loadSteps(api.db, id)).filter((s) => s.kind === 'event');
      // Earlier rounds' waits were closed when the next round opened its own; none is left open.
      expect(waits.map((w) => [w.name, w.completed, w.outcome])).toEqual([
        ['approval', false, 'cancelled'],
        ['approval#2', false, 'cancelled'],
        ['approval#3', true, null],
      ]);
    });
  });

  test('waiting twice at once for the same event: the older wait is closed with WaitSupersededError', async () => {
    const twice = defineTask({
      name: 'race-same-event-twice',
      async run(ctx) {
        const older = ctx.waitForEvent('x').catch((err: Error) => err.name);
        const newer = ctx.waitForEvent('x');
        return Promise.all([older, newer]);
      },
    });
    await withWorkers([twice], 0, 1, async () => {
      const { execution_id: id } = await api.client.schedule(twice.name);
      await waitUntil(async () => (await api.call('POST', `/api/v1/events/${id}/x`, { headers: JSON_HEADERS, body: '7' })).status === 200, 'x delivered');
      expect(await finished(id)).toMatchObject({ status: 'completed', output: ['WaitSupersededError', 7] });
    });
  });
});

describe('a step whose function returned is recorded', () => {
  let fixed = false;
  const sibling = defineTask({
    name: 'race-step-beside-failure',
    async run(ctx) {
      return Promise.all([
        ctx.step('slow', async () => {
          bump(`slow:${ctx.executionId}`);
          await new Promise((r) => setTimeout(r, 500));
          return 'slow';
        }),
        ctx.step('broken', () => {
          if (!fixed) throw new NonRetryableError('broken until fixed');
          return 'fixed';
        }),
      ]);
    },
  });

  test('a sibling that fails the execution: the running step is recorded, and a retry does not run it again', async () => {
    await withWorkers([sibling], 0, 1, async () => {
      const { execution_id: id } = await api.client.schedule(sibling.name);
      expect(await finished(id)).toMatchObject({ status: 'failed' });
      expect((await loadSteps(api.db, id)).find((s) => s.name === 'slow')).toMatchObject({ completed: true, result: 'slow' });
      fixed = true;
      expect((await api.call('POST', `/api/v1/executions/${id}/retry`, { headers: JSON_HEADERS })).status).toBe(200);
      expect(await finished(id)).toMatchObject({ status: 'completed', output: ['slow', 'fixed'] });
      expect(runs.get(`slow:${id}`)).toBe(1);
    });
  });
});

describe('a replay that meets another history fails, naming both operations', () => {
  let variant: 'v1' | 'added' | 'skipped' = 'v1';
  const changing = defineTask({
    name: 'race-changing-code',
    async run(ctx) {
      if (variant !== 'skipped') await ctx.step('load', () => 'loaded');
      if (variant === 'added') await ctx.step('audit', () => 'new');
      await ctx.sleep('cool-off', 300);
      return ctx.step('finish', () => 'done');
    },
  });

  test.each([
    ['a step added before a recorded sleep', 'added', /#2: history has sleep "cool-off", the handler called step "audit"/],
    ['a recorded step skipped', 'skipped', /#1: history has step "load", the handler called sleep "cool-off"/],
  ] as const)('%s', async (_what, next, message) => {
    variant = 'v1';
    await withWorkers([changing], 0, 1, async () => {
      const { execution_id: id } = await api.client.schedule(changing.name);
      await waitUntil(async () => (await api.client.get(id)).status === 'waiting', 'sleeping');
      variant = next;
      const failed = await finished(id);
      expect(failed).toMatchObject({ status: 'failed', error: { type: 'NonDeterminismError', retryable: false } });
      expect(failed.error?.message).toMatch(message);
    });
  });
});

describe('a ctx call made wrongly fails at once, not retried', () => {
  const wrong = defineTask({
    name: 'race-wrong-calls',
    retry: { maxAttempts: 5, initialDelay: 10, maxDelay: 10 },
    async run(ctx, data: unknown) {
      const { call } = data as { call: string };
      bump(`wrong:${ctx.executionId}`);
      if (call === 'duration') await ctx.sleep('x', 'abc' as never);
      if (call === 'far') await ctx.sleep('x', '9000y' as never);
      if (call === 'dot') await ctx.waitForEvent('.' as never);
      if (call === 'dots') await ctx.waitForEvent('..' as never);
      return 'unreachable';
    },
  });

  test.each([
    ['a duration that is not one', 'duration', 'RangeError', /"abc" is not a valid duration/],
    ['a duration past the year 9999', 'far', 'RangeError', /too long|past the year 9999/],
    ['an event named "."', 'dot', 'TypeError', /cannot be delivered/],
    ['an event named ".."', 'dots', 'TypeError', /cannot be delivered/],
  ])('%s', async (_what, call, type, message) => {
    await withWorkers([wrong], 0, 1, async () => {
      const { execution_id: id } = await api.client.schedule(wrong.name, { call });
      const failed = await finished(id);
      expect(failed).toMatchObject({ status: 'failed', attempt: 1, error: { type, retryable: false } });
      expect(failed.error?.message).toMatch(message);
      expect(runs.get(`wrong:${id}`)).toBe(1);
    });
  });

  test('a task that declares an event named "." or ".." is refused where it is defined', () => {
    for (const name of ['.', '..']) {
      expect(() => defineTask({ name: 'race-dot-event', events: { [name]: {} as never }, async run() {} })).toThrow(/cannot be delivered/);
    }
  });
});
