// POST /executions with `start_at`: the execution stays pending until then, over the API and with a
// real worker.
import pg from 'pg';
import { Registry } from 'prom-client';
import { defineTask } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { claimExecutions } from '../../src/store/transitions/claim';
import { insertExecutions } from '../../src/store/executions';
import { queryRows } from '../../src/store/db';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { startWorker } from '../helpers/worker';
import { waitUntil } from '../helpers/wait-until';
import { observeWorker } from '../../src/worker-metrics';

let api: TestApi;
let worker: Worker;
const registry = new Registry();
const JSON_HEADERS = { 'Content-Type': 'application/json' };
/** When each execution of the worker's task entered its handler, and its ctx.scheduledFor. */
const handlerStarts = new Map<string, number>();
const scheduledFor = new Map<string, Date>();

const stamp = defineTask({
  name: 'delayed-stamp',
  async run(ctx) {
    handlerStarts.set(ctx.executionId, Date.now());
    scheduledFor.set(ctx.executionId, ctx.scheduledFor);
    return 'ran';
  },
});

beforeAll(async () => {
  api = await startTestApi();
  worker = await startWorker(api.t, [stamp] as never, { pollIntervalMs: 200, observer: observeWorker(registry) });
});
afterAll(async () => {
  await worker.stop();
  await api.close();
});

function schedule(body: Record<string, unknown>) {
  return api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: JSON.stringify({ data: {}, ...body }) });
}

async function dueAt(id: string): Promise<Date> {
  const [row] = await queryRows<{ due_at: Date }>(api.db, 'SELECT due_at FROM stepwise.executions WHERE id = ?', [id]);
  return row.due_at;
}

describe('start_at over the API', () => {
  test('a start_at that is not an RFC 3339 instant with a time zone is 422 invalid_data, checked before the task', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    for (const startAt of ['tomorrow', '2030-10-30', '2030-10-30T12:00:00', '2030-02-30T12:00:00Z', '2030-10-30T25:00:00Z', 1924991999, null, '']) {
      const res = await schedule({ task, start_at: startAt });
      expect({ startAt, status: res.status }).toEqual({ startAt, status: 422 });
      expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [expect.objectContaining({ path: 'body/start_at' })] } });
    }
    // The body's shape is checked before whether the task exists.
    const unknown = await schedule({ task: 'never-registered', start_at: 'soon' });
    expect(unknown.body).toMatchObject({ error: { code: 'invalid_data' } });
    expect(await api.client.list({ task })).toMatchObject({ total: 0 });
  });

  test('a future start_at keeps the execution pending and unclaimable until then, and the resource shows it in UTC', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const created = await schedule({ task, data: { n: 1 }, start_at: '2099-06-01T14:30:00+02:00' });
    expect(created.status).toBe(201);
    const id = (created.body as { execution_id: string }).execution_id;
    expect(await api.client.get(id)).toMatchObject({ status: 'pending', start_at: '2099-06-01T12:30:00.000Z', started_at: null, attempt: 0 });
    expect((await dueAt(id)).toISOString()).toBe('2099-06-01T12:30:00.000Z');
    expect(await claimExecutions(api.db, [task], 10, 30000)).toEqual([]);
    // Without start_at the field is null.
    const now = await api.client.schedule(task, {});
    expect((await api.client.get(now.execution_id)).start_at).toBeNull();
  });

  test('one INSERT of a batch that mixes start times gives each row its own start and due time', async () => {
    const task = uniqueTask();
    const later = new Date(Date.now() + 3_600_000);
    const [a, b, c] = await insertExecutions(api.db, [{ task, data: 1, startAt: later }, { task, data: 2 }, { task, data: 3, startAt: new Date(0) }]);
    const rows = await queryRows<{ id: string; start_at: Date | null; due_at: Date; created_at: Date }>(
      api.db,
      'SELECT id, start_at, due_at, created_at FROM stepwise.executions WHERE task = ?',
      [task],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get(a.execution.id)).toMatchObject({ start_at: later, due_at: later });
    expect(byId.get(b.execution.id)?.start_at).toBeNull();
    expect(byId.get(c.execution.id)?.start_at).toEqual(new Date(0));
    for (const r of [byId.get(b.execution.id), byId.get(c.execution.id)]) expect(r?.due_at).toEqual(r?.created_at);
  });

  test('a leap second is read as the start of the next second', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const { execution_id: id } = await api.client.schedule(task, {}, { startAt: '2098-12-31T23:59:60Z' });
    expect((await api.client.get(id)).start_at).toBe('2099-01-01T00:00:00.000Z');
  });

  test('an instant outside the years 0001-9999 in UTC is 422; the edges, and offsets written short, are accepted', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    for (const startAt of ['9999-12-31T23:59:60Z', '9999-12-31T23:00:00-01:00', '0000-12-31T23:59:59Z', '0001-01-01T00:00:00+00:01']) {
      const res = await schedule({ task, start_at: startAt });
      expect({ startAt, status: res.status }).toEqual({ startAt, status: 422 });
      expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body/start_at', message: 'must be an instant in the years 0001 to 9999 (UTC)' }] } });
    }
    for (const [startAt, stored] of [
      ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
      ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
      ['0001-01-01t01:00:00+01:00', '0001-01-01T00:00:00.000Z'],
      ['2030-10-30T19:00:00+01', '2030-10-30T18:00:00.000Z'],
      ['2030-10-30T13:30:00.250-0530', '2030-10-30T19:00:00.250Z'],
    ]) {
      const { execution_id: id } = await api.client.schedule(task, {}, { startAt });
      expect((await api.client.get(id)).start_at).toBe(stored);
    }
  });

  test('a start_at in the past starts at once, but never ahead of work queued before it', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const first = await api.client.schedule(task, { order: 1 });
    const backdated = await api.client.schedule(task, { order: 2 }, { startAt: new Date('2001-01-01T00:00:00Z') });
    expect((await api.client.get(backdated.execution_id)).start_at).toBe('2001-01-01T00:00:00.000Z');
    const [claimed] = await claimExecutions(api.db, [task], 1, 30000);
    expect(claimed.execution.id).toBe(first.execution_id);
    const [next] = await claimExecutions(api.db, [task], 1, 30000);
    expect(next.execution.id).toBe(backdated.execution_id);
  });

  test('scheduling for later wakes no worker now; scheduling for now does', async () => {
    const [later, sentinel] = [uniqueTask('later'), uniqueTask('sentinel')];
    await registerTask(api.db, later);
    await registerTask(api.db, sentinel);
    const listener = new pg.Client({ connectionString: api.t.url });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (m) => heard.push(m.payload ?? ''));
    await listener.query('LISTEN stepwise_work');
    try {
      await api.client.schedule(later, {}, { startAt: new Date(Date.now() + 3_600_000) });
      await api.client.schedule(sentinel, {});
      // Notifications arrive in commit order: once the sentinel's has, the delayed one's would have too.
      await waitUntil(() => heard.includes(sentinel), 'the sentinel notification');
      expect(heard).not.toContain(later);
    } finally {
      await listener.end();
    }
  });

  test('a delayed execution can be cancelled before it starts, and then never runs', async () => {
    const { execution_id: id } = await api.client.schedule('delayed-stamp', {}, { startAt: new Date(Date.now() + 1500) });
    expect(await api.client.cancel(id)).toEqual({ execution_id: id, status: 'cancelled' });
    // Long enough for the worker (polling every 200 ms) to have found it, had it stayed due.
    const marker = await api.client.schedule('delayed-stamp', {}, { startAt: new Date(Date.now() + 2000) });
    await api.client.wait(marker.execution_id, { timeoutSeconds: 30 });
    expect(handlerStarts.has(id)).toBe(false);
    expect(await api.client.get(id)).toMatchObject({ status: 'cancelled', started_at: null, attempt: 0 });
  });

  test('a real worker starts it no earlier than start_at, and soon after, while work scheduled later for now runs first', async () => {
    const startAt = new Date(Date.now() + 1200);
    const delayed = await api.client.schedule('delayed-stamp', {}, { startAt });
    const immediate = await api.client.schedule('delayed-stamp', {});
    const done = await api.client.wait(delayed.execution_id, { timeoutSeconds: 30 });
    expect(done).toMatchObject({ status: 'completed', output: 'ran', start_at: startAt.toISOString() });
    const started = handlerStarts.get(delayed.execution_id) as number;
    expect(started).toBeGreaterThanOrEqual(startAt.getTime());
    expect(Date.parse(done.started_at as string)).toBeGreaterThanOrEqual(startAt.getTime());
    // Found by the worker's poll (every 200 ms here), not by chance: well within 5 s of start_at.
    expect(started - startAt.getTime()).toBeLessThan(5000);
    expect(handlerStarts.get(immediate.execution_id)).toBeLessThan(startAt.getTime());
    // ctx.scheduledFor: the start_at asked for, else when it was scheduled.
    expect(scheduledFor.get(delayed.execution_id)).toEqual(startAt);
    expect(scheduledFor.get(immediate.execution_id)?.toISOString()).toBe(immediate.created_at);
    // The schedule-to-start metric counts from start_at, not from scheduling: no observation near 1.2 s.
    const histogram = (await registry.getSingleMetric('stepwise_schedule_to_start_seconds')?.get()) as { values: Array<{ labels: Record<string, unknown>; value: number; metricName?: string }> };
    const count = (name: string, le?: number) =>
      histogram.values.filter((v) => v.metricName === name && v.labels.task === 'delayed-stamp' && (le === undefined || v.labels.le === le)).reduce((n, v) => n + v.value, 0);
    expect(count('stepwise_schedule_to_start_seconds_count')).toBeGreaterThanOrEqual(2);
    expect(count('stepwise_schedule_to_start_seconds_bucket', 1)).toBe(count('stepwise_schedule_to_start_seconds_count'));
  });
});
