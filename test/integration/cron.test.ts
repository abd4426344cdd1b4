// Tasks with a cron schedule: fired by every worker serving them, started once per fire time.
import { defineTask } from '../../src/index';
import { CronFirer, cronKey } from '../../src/engine/cron';
import { queryRows } from '../../src/store/db';
import { upsertTasks } from '../../src/store/tasks';
import { insertExecutions } from '../../src/store/executions';
import { nextFireAfter } from '../../src/domain/cron';
import { createLogger } from '../../src/logger';
import { LogCapture, startTestApi, type TestApi } from '../helpers/api-server';
import { uniqueTask } from '../helpers/simulated-worker';
import { quietLog, startWorker } from '../helpers/worker';
import { waitUntil } from '../helpers/wait-until';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface Row {
  id: string;
  idempotency_key: string;
  start_at: Date;
  status: string;
  data: unknown;
}

function rowsOf(task: string): Promise<Row[]> {
  return queryRows<Row>(api.db, 'SELECT id, idempotency_key, start_at, status, data FROM stepwise.executions WHERE task = ? ORDER BY start_at', [task]);
}

describe('cron', () => {
  test('three firers, one with a clock 400 ms ahead, start exactly one execution per fire time between them, and stop when stopped', async () => {
    const task = uniqueTask('every-second');
    const schedule = { pattern: '* * * * * *', timezone: 'UTC', data: { report: 'daily' } };
    const fired: Array<{ at: string; created: boolean }> = [];
    const onFired = (_: string, at: Date, created: boolean) => fired.push({ at: at.toISOString(), created });
    const firers = [0, 0, 400].map(
      (skew) => new CronFirer({ db: api.db, log: quietLog, schedules: [{ task, schedule }], onFired, now: () => Date.now() + skew }),
    );
    firers.forEach((f) => f.start());
    await waitUntil(() => new Set(fired.map((f) => f.at)).size >= 4, 'four fire times');
    await Promise.all(firers.map((f) => f.stop()));

    const rows = await rowsOf(task);
    const times = [...new Set(fired.map((f) => f.at))].sort();
    // One execution per fire time, keyed by it, starting at it, with the trigger's data.
    expect(rows.map((r) => r.start_at.toISOString())).toEqual(times);
    expect(rows.map((r) => r.idempotency_key)).toEqual(times.map((t) => cronKey(task, new Date(t))));
    expect(rows.every((r) => r.status === 'pending' && JSON.stringify(r.data) === '{"report":"daily"}')).toBe(true);
    // Fire times are whole, consecutive seconds, each created once.
    times.forEach((t, i) => {
      expect(t.endsWith('.000Z')).toBe(true);
      if (i > 0) expect(Date.parse(t) - Date.parse(times[i - 1])).toBe(1000);
    });
    for (const t of times) expect(fired.filter((f) => f.at === t && f.created)).toHaveLength(1);
    // The first and last may fall before a firer started or after it stopped; those between, all three fired.
    for (const t of times.slice(1, -1)) expect(fired.filter((f) => f.at === t)).toHaveLength(3);
    // Stopped firers fire no more.
    const after = fired.length;
    await new Promise((r) => setTimeout(r, 1200));
    expect(fired.length).toBe(after);
  });

  test('a worker runs its cron task on schedule, and GET /tasks shows the schedule with its next fire time', async () => {
    const ran: string[] = [];
    const firedFor = new Map<string, Date>();
    const name = uniqueTask('cron-task');
    const every = defineTask({
      name,
      cron: { pattern: '* * * * * *', timezone: 'Europe/Paris' },
      async run(ctx) {
        ran.push(ctx.executionId);
        firedFor.set(ctx.executionId, ctx.scheduledFor);
        return 'tick';
      },
    });
    const worker = await startWorker(api.t, [every] as never);
    try {
      await waitUntil(async () => (await rowsOf(name)).filter((r) => r.status === 'completed').length >= 2, 'two runs of the cron task');
      const tasks = await api.client.listTasks();
      const listed = tasks.find((t) => t.name === name);
      expect(listed?.cron).toEqual({ pattern: '* * * * * *', timezone: 'Europe/Paris', next_at: expect.stringMatching(/\.000Z$/) });
      expect(Date.parse(listed?.cron?.next_at as string)).toBeGreaterThan(Date.now() - 1000);
      const [first] = await rowsOf(name);
      expect(await api.client.get(first.id)).toMatchObject({ status: 'completed', output: 'tick', start_at: first.start_at.toISOString() });
      // The handler reads its fire time as ctx.scheduledFor.
      expect(firedFor.get(first.id)).toEqual(first.start_at);
    } finally {
      await worker.stop();
    }
    expect(ran.length).toBeGreaterThanOrEqual(2);
  });

  test('a task without cron lists cron null, and a worker that drops the cron clears it', async () => {
    const name = uniqueTask('was-cron');
    await upsertTasks(api.db, [{ name, dataSchema: null, eventSchemas: {}, retry: null, cron: { pattern: '0 * * * *', timezone: 'UTC' } }]);
    expect((await api.client.listTasks()).find((t) => t.name === name)?.cron).toMatchObject({ pattern: '0 * * * *' });
    const plain = defineTask({ name, run: async () => null });
    const worker = await startWorker(api.t, [plain] as never);
    await worker.stop();
    expect((await api.client.listTasks()).find((t) => t.name === name)?.cron).toBeNull();
  });

  test('clients may not use cron: keys, and a fire time whose key another task holds is skipped with a warning', async () => {
    const task = uniqueTask('cron-keyed');
    const res = await api.call('POST', '/api/v1/executions', {
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ task, data: {}, idempotency_key: cronKey(task, new Date()) }),
    });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body/idempotency_key', message: 'must not start with "cron:", which cron schedules use' }] } });

    // Keys written around the API (by an older release, say) for the next fire times, by another task.
    const schedule = { pattern: '* * * * * *', timezone: 'UTC', data: null };
    const next = nextFireAfter(schedule, new Date()) as Date;
    const times = [0, 1, 2, 3].map((s) => new Date(next.getTime() + s * 1000));
    await insertExecutions(api.db, times.map((at) => ({ task: 'someone-else', data: null, idempotencyKey: cronKey(task, at) })));
    const logs = new LogCapture();
    const fired: boolean[] = [];
    const firer = new CronFirer({ db: api.db, log: createLogger({ level: 'info', destination: logs }), schedules: [{ task, schedule }], onFired: (_, __, created) => fired.push(created) });
    firer.start();
    try {
      await waitUntil(() => fired.length >= 1, 'a fire');
    } finally {
      await firer.stop();
    }
    expect(fired[0]).toBe(false);
    expect(await rowsOf(task)).toEqual([]);
    const warned = logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'cron fire time skipped: its key is held by an execution of another task');
    expect(warned[0]).toMatchObject({ level: 40, task, heldBy: 'someone-else' });
  });
});
