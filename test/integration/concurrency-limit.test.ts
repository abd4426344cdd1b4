// Tasks with a concurrency limit: at most `limit` executions running at once over all workers.
import { defineTask, Type } from '../../src/index';
import { claimThrottledExecutions } from '../../src/store/transitions/claim-throttled';
import { insertExecutions } from '../../src/store/executions';
import { queryRows } from '../../src/store/db';
import { renewLeases } from '../../src/store/leases';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { uniqueTask } from '../helpers/simulated-worker';
import { startWorker } from '../helpers/worker';
import { waitUntil } from '../helpers/wait-until';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

/** A claim of a task limited to `cap` running at once, without a key: `want` is the worker's room. */
const claimLimitedExecutions = async (db: TestApi['db'], task: string, cap: number, want: number, leaseMs: number) =>
  (await claimThrottledExecutions(db, task, { concurrency: { limit: cap, key: null }, rateLimit: null, debounce: null }, want, leaseMs, null, '')).claimed;

const runningOf = async (task: string) =>
  (await queryRows<{ n: number }>(api.db, "SELECT count(*)::int AS n FROM stepwise.executions WHERE task = ? AND status = 'running'", [task]))[0].n;

describe('concurrency limit', () => {
  test('defineTask takes { limit } of at least 1', () => {
    const run = async () => null;
    for (const bad of [{ limit: 0 }, { limit: 1.5 }, { limit: '2' }, {}]) {
      expect(() => defineTask({ name: 'limited', concurrency: bad as never, run })).toThrow('task limited: concurrency.limit must be a whole number from 1 to 1,000,000');
    }
    expect(() => defineTask({ name: 'limited', concurrency: 3 as never, run })).toThrow('task limited: concurrency must be { limit, key? }');
    expect(defineTask({ name: 'limited', concurrency: { limit: 2 }, run }).concurrency).toEqual({ limit: 2 });
  });

  test('twenty concurrent claims of a task limited to 3 never take more than 3 between them; later claims fill it up to 3', async () => {
    const task = uniqueTask('limited');
    await insertExecutions(api.db, Array.from({ length: 30 }, (_, i) => ({ task, data: i })));
    const claims = await Promise.all(Array.from({ length: 20 }, () => claimLimitedExecutions(api.db, task, 3, 2, 30_000)));
    expect(claims.flat().length).toBeGreaterThanOrEqual(2);
    expect(claims.flat().length).toBeLessThanOrEqual(3);
    // One after another, the claims take the rest of the limit, then nothing.
    for (let i = 0; i < 3; i++) await claimLimitedExecutions(api.db, task, 3, 2, 30_000);
    expect(await runningOf(task)).toBe(3);
    expect(await claimLimitedExecutions(api.db, task, 3, 2, 30_000)).toEqual([]);
    // An expired lease does not count: its execution is taken over within the limit.
    await queryRows(api.db, "UPDATE stepwise.executions SET due_at = now() - interval '1 second' WHERE id = ?", [claims.flat()[0].execution.id]);

    const expiredId = claims.flat()[0].execution.id;
    const more = await claimLimitedExecutions(api.db, task, 3, 5, 30_000);
    expect(more.map((c) => c.execution.id)).toEqual([expiredId]);
    expect(await runningOf(task)).toBe(3);
  });

  test('a lease past its end is not renewed: the limit counted it out and may have filled its place', async () => {
    const task = uniqueTask('limited');
    await insertExecutions(api.db, [{ task, data: 1 }, { task, data: 2 }]);
    const [first] = await claimLimitedExecutions(api.db, task, 1, 1, 300);
    await new Promise((r) => setTimeout(r, 400));
    const [second] = await claimLimitedExecutions(api.db, task, 1, 1, 30_000);
    expect(second.execution.id).not.toBe(first.execution.id);
    const lease = { id: first.execution.id, token: first.execution.leaseToken as string };
    expect(await renewLeases(api.db, [lease], 30_000)).toEqual(new Set());
    const live = await queryRows<{ n: number }>(api.db, "SELECT count(*)::int AS n FROM stepwise.executions WHERE task = ? AND status = 'running' AND due_at > now()", [task]);
    expect(live[0].n).toBe(1);
    // A lease still within its end renews.
    const held = { id: second.execution.id, token: second.execution.leaseToken as string };
    expect(await renewLeases(api.db, [held, lease], 30_000)).toEqual(new Set([held.id]));
  });

  test('three workers never run more than the limit at once, yet run everything, and sleeping executions free their place', async () => {
    const name = uniqueTask('limited-run');
    let running = 0;
    let most = 0;
    const task = defineTask({
      name,
      data: Type.Object({ i: Type.Integer(), sleep: Type.Boolean() }),
      concurrency: { limit: 3 },
      async run(ctx, data) {
        running += 1;
        most = Math.max(most, running);
        await new Promise((r) => setTimeout(r, 40));
        running -= 1;
        // Sleeping, it holds no place: the others go on meanwhile.
        if (data.sleep) await ctx.sleep('pause', '1h');
        return data.i;
      },
    });
    const workers = await Promise.all([0, 1, 2].map(() => startWorker(api.t, [task] as never, { concurrency: 8, pollIntervalMs: 100 })));
    try {
      // Three take the three places, then sleep for long: sleeping, they hold none.
      const sleepers = await Promise.all([0, 1, 2].map((i) => api.client.schedule(name, { i, sleep: true })));
      await waitUntil(async () => (await Promise.all(sleepers.map((s) => api.client.get(s.execution_id)))).every((e) => e.status === 'waiting'), 'the three to sleep');
      const scheduled = await Promise.all(Array.from({ length: 27 }, (_, i) => api.client.schedule(name, { i: i + 3, sleep: false })));
      const done = await Promise.all(scheduled.map((s) => api.client.wait(s.execution_id, { deadlineMs: 10_000 })));
      expect(done.map((d) => d.output)).toEqual(Array.from({ length: 27 }, (_, i) => i + 3));
      expect(most).toBe(3);
      for (const s of sleepers) expect((await api.client.get(s.execution_id)).status).toBe('waiting');
      await Promise.all(sleepers.map((s) => api.client.cancel(s.execution_id)));
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
    const listed = (await api.client.listTasks()).find((t) => t.name === name);
    expect(listed?.concurrency_limit).toBe(3);
  });

  test('a worker serving limited and unlimited tasks runs both, the limited one within its limit', async () => {
    const [limitedName, freeName] = [uniqueTask('lim'), uniqueTask('free')];
    let limitedRunning = 0;
    let limitedMost = 0;
    let freeMost = 0;
    let freeRunning = 0;
    const hold = () => new Promise((r) => setTimeout(r, 30));
    const limited = defineTask({
      name: limitedName,
      concurrency: { limit: 2 },
      async run() {
        limitedMost = Math.max(limitedMost, ++limitedRunning);
        await hold();
        limitedRunning -= 1;
        return 'l';
      },
    });
    const free = defineTask({
      name: freeName,
      async run() {
        freeMost = Math.max(freeMost, ++freeRunning);
        await hold();
        freeRunning -= 1;
        return 'f';
      },
    });
    const worker = await startWorker(api.t, [limited, free] as never, { concurrency: 16, pollIntervalMs: 100 });
    try {
      const ids = await Promise.all(Array.from({ length: 40 }, (_, i) => api.client.schedule(i % 2 ? limitedName : freeName, {})));
      await waitUntil(async () => (await Promise.all(ids.map((s) => api.client.get(s.execution_id)))).every((e) => e.status === 'completed'), 'all 40 to complete', 30_000);
    } finally {
      await worker.stop();
    }
    expect(limitedMost).toBe(2);
    expect(freeMost).toBeGreaterThan(2);
  });

  test('a backlog of other tasks does not starve a limited task on the same worker', async () => {
    const [limitedName, busyName] = [uniqueTask('lim'), uniqueTask('busy')];
    const finished: string[] = [];
    const limited = defineTask({ name: limitedName, concurrency: { limit: 2 }, async run() {
      finished.push('limited');
      return null;
    } });
    const busy = defineTask({ name: busyName, async run() {
      await new Promise((r) => setTimeout(r, 5));
      finished.push('busy');
      return null;
    } });
    // The backlog first, then the limited ones: due after it, they must not wait for all of it.
    await insertExecutions(api.db, Array.from({ length: 400 }, (_, i) => ({ task: busyName, data: i })));
    await insertExecutions(api.db, [{ task: limitedName, data: 1 }, { task: limitedName, data: 2 }]);
    const worker = await startWorker(api.t, [limited, busy] as never, { concurrency: 4, pollIntervalMs: 100 });
    try {
      await waitUntil(() => finished.filter((f) => f === 'limited').length === 2, 'the limited executions to run', 30_000);
      expect(finished.filter((f) => f === 'busy').length).toBeLessThan(100);
    } finally {
      await worker.stop();
    }
  });
});
