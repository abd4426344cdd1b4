// GET /stats/throughput: executions created, completed and failed per minute, over real HTTP.
import { defineTask, NonRetryableError } from '../../src/index';
import type { Throughput } from '../../src/client';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { claimExecution, completeAs, failAs, registerTask, uniqueTask } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

async function freshTask(): Promise<string> {
  const task = uniqueTask('tp');
  await registerTask(api.db, task);
  return task;
}

const sum = (t: Throughput, field: 'created' | 'completed' | 'failed') => t.buckets.reduce((n, b) => n + b[field], 0);

/** The bucket whose minute holds `iso`, or undefined when the window does not. */
const bucketOf = (t: Throughput, iso: string) => t.buckets.find((b) => b.start === `${iso.slice(0, 17)}00.000Z`);

/** Moves an execution's creation (and, when given, its end) `minutes` back in time, as the database sees it. */
async function backdate(id: string, created: number, completed?: number): Promise<{ created_at: string; completed_at: string | null }> {
  const { rows } = await api.db.raw(
    `UPDATE stepwise.executions SET created_at = now() - make_interval(mins => ?::int),
            completed_at = CASE WHEN ?::int IS NULL THEN completed_at ELSE now() - make_interval(mins => ?::int) END
      WHERE id = ? RETURNING created_at, completed_at`,
    [created, completed ?? null, completed ?? null, id],
  );
  const iso = (d: Date | null) => (d === null ? null : d.toISOString());
  return { created_at: iso(rows[0].created_at) as string, completed_at: iso(rows[0].completed_at) };
}

describe('GET /api/v1/stats/throughput', () => {
  test('answers one bucket per minute of the last hour by default, oldest first, the minute in progress last', async () => {
    const before = Date.now();
    const t = await api.client.throughput();
    expect(t).toMatchObject({ window: '1h', task: null, bucket_seconds: 60 });
    expect(t.buckets).toHaveLength(60);
    const starts = t.buckets.map((b) => Date.parse(b.start));
    expect(starts.every((s, i) => s % 60_000 === 0 && (i === 0 || s - starts[i - 1] === 60_000))).toBe(true);
    expect(t.from).toBe(t.buckets[0].start);
    expect(Date.parse(t.to)).toBe(starts[59] + 60_000);
    // The last bucket holds now (the database's clock; this one is the same machine's).
    expect(Math.abs(starts[59] - Math.floor(before / 60_000) * 60_000)).toBeLessThanOrEqual(60_000);
    const short = await api.client.throughput({ window: '5m' });
    expect(short.buckets).toHaveLength(5);
    expect(short.window).toBe('5m');
  });

  test("counts a task's creations by created_at and its completions and failures by completed_at, each in its minute", async () => {
    const task = await freshTask();
    // Each claimed as soon as it is scheduled: a claim takes every due execution of the task.
    const claimNext = async () => {
      const { execution_id: id } = await api.client.schedule(task);
      return { id, lease: await claimExecution(api.db, task, id) };
    };
    const [done, failed, lateDone, old] = [await claimNext(), await claimNext(), await claimNext(), await claimNext()];
    for (const x of [done, lateDone, old]) await completeAs(api.db, x.lease, { ok: true });
    await failAs(api.db, failed.lease, 'card declined');
    await claimNext(); // running: counted as created all the same

    // Created 10 minutes ago and completed 3 minutes ago; created 2 hours ago and completed 90 minutes ago (outside).
    const late = await backdate(lateDone.id, 10, 3);
    await backdate(old.id, 120, 90);
    const t = await api.client.throughput({ task });
    expect(t.task).toBe(task);
    expect({ created: sum(t, 'created'), completed: sum(t, 'completed'), failed: sum(t, 'failed') }).toEqual({ created: 4, completed: 2, failed: 1 });
    expect(await api.client.get(done.id)).toMatchObject({ status: 'completed' });
    expect(bucketOf(t, late.created_at)).toMatchObject({ created: 1 });
    expect(bucketOf(t, late.completed_at as string)).toMatchObject({ completed: 1 });

    // Every task's counts hold this task's.
    const all = await api.client.throughput();
    expect(sum(all, 'created')).toBeGreaterThanOrEqual(4);
    expect(bucketOf(all, late.completed_at as string)?.completed).toBeGreaterThanOrEqual(1);
    // Another task's counts do not.
    const other = await freshTask();
    const none = await api.client.throughput({ task: other });
    expect([sum(none, 'created'), sum(none, 'completed'), sum(none, 'failed')]).toEqual([0, 0, 0]);
  });

  test('counts what a real worker completes and fails', async () => {
    const quick = defineTask({ name: uniqueTask('tp-quick'), async run(ctx) { return ctx.step('one', () => 1); } });
    const doomed = defineTask({ name: uniqueTask('tp-doomed'), async run() { throw new NonRetryableError('no'); } });
    const worker = await startWorker(api.t, [quick, doomed] as never);
    try {
      const a = await api.client.schedule(quick.name);
      const b = await api.client.schedule(doomed.name);
      await waitUntil(async () => (await api.client.get(a.execution_id)).status === 'completed' && (await api.client.get(b.execution_id)).status === 'failed', 'both to finish');
      const [q, d] = await Promise.all([api.client.throughput({ task: quick.name, window: '15m' }), api.client.throughput({ task: doomed.name, window: '15m' })]);
      expect([sum(q, 'created'), sum(q, 'completed'), sum(q, 'failed')]).toEqual([1, 1, 0]);
      expect([sum(d, 'created'), sum(d, 'completed'), sum(d, 'failed')]).toEqual([1, 0, 1]);
    } finally {
      await worker.stop();
    }
  });

  test('an unknown task is 404 task_not_found', async () => {
    const res = await api.call('GET', '/api/v1/stats/throughput?task=nobody-registered-this');
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: { code: 'task_not_found', message: 'task "nobody-registered-this" is not registered' } });
  });

  test.each([
    ['a window it does not offer', 'window=2h', 'query/window'],
    ['an empty window', 'window=', 'query/window'],
    ['a window without its unit', 'window=60', 'query/window'],
    ['an empty task', 'task=', 'query/task'],
    ['a task name over 255 characters', `task=${'x'.repeat(256)}`, 'query/task'],
    ['an unknown parameter', 'bucket=10s', 'query/bucket'],
  ])('%s is 422 invalid_data naming the parameter', async (_what, query, detailPath) => {
    const res = await api.call('GET', `/api/v1/stats/throughput?${query}`);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [expect.objectContaining({ path: detailPath })] } });
  });
});
