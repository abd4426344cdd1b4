// Operating executions (issue #19): attempts, retry from the failure, bulk actions, pause and resume,
// against a real worker and API server.
import { defineTask, NonRetryableError, Type } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { getExecution } from '../../src/store/executions';
import { claimExecutions } from '../../src/store/transitions/claim';
import { queryRows } from '../../src/store/db';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';
import { registerTask } from '../helpers/simulated-worker';

let api: TestApi;
let worker: Worker;
const JSON_HEADERS = { 'Content-Type': 'application/json' };
const runs = new Map<string, number>();
const bump = (key: string) => runs.set(key, (runs.get(key) ?? 0) + 1);
/** Whether the "broken" step of a task fails: the operator fixes it, then retries. */
const broken = new Set<string>();

const flaky = defineTask({
  name: 'op-flaky',
  retry: { maxAttempts: 3, initialDelay: 10, maxDelay: 20 },
  async run(ctx) {
    if (ctx.attempt < 3) throw new Error(`flaky on attempt ${ctx.attempt}`);
    return 'third time';
  },
});

const fixable = defineTask({
  name: 'op-fixable',
  data: Type.Object({ key: Type.String() }),
  retry: { maxAttempts: 2, initialDelay: 10, maxDelay: 20 },
  async run(ctx, data) {
    const a = await ctx.step('prepare', () => {
      bump(`prepare:${data.key}`);
      return 1;
    });
    const b = await ctx.step('call', ({ attempt }) => {
      bump(`call:${data.key}`);
      if (broken.has(data.key)) throw new Error(`down on attempt ${attempt}`);
      return 2;
    });
    return a + b;
  },
});

const sleepy = defineTask({
  name: 'op-sleepy',
  async run(ctx) {
    await ctx.sleep('nap', 300);
    return 'rested';
  },
});

const waitsForGo = defineTask({
  name: 'op-child',
  async run(ctx) {
    return ctx.waitForEvent('go');
  },
});

const parent = defineTask({
  name: 'op-parent',
  async run(ctx) {
    bump(`parent:${ctx.executionId}`);
    const before = await ctx.step('before', () => 'b');
    const child = await ctx.invoke('child', waitsForGo, {});
    return { before, child };
  },
});

const hangs = defineTask({
  name: 'op-hangs',
  async run(ctx) {
    await ctx.step('hang', () => new Promise(() => undefined));
  },
});

const idle = defineTask({ name: 'op-idle', run: async () => 'ran' });
const marker = defineTask({ name: 'op-marker', run: async () => 'marked' });
const quick = defineTask({ name: 'op-quick', run: async () => 'done' });

beforeAll(async () => {
  api = await startTestApi();
  worker = await startWorker(api.t, [flaky, fixable, sleepy, waitsForGo, parent, quick] as never, { pollIntervalMs: 100 });
});
afterAll(async () => {
  await worker.stop();
  await api.close();
});

const schedule = async (task: string, data: Record<string, unknown> = {}) => (await api.client.schedule(task, data)).execution_id;
const finished = (id: string) => api.client.wait(id, { deadlineMs: 15_000 });

describe('attempts', () => {
  test('every attempt is kept: the failed ones with their errors and stacks, the last from the execution', async () => {
    const id = await schedule(flaky.name);
    expect(await finished(id)).toMatchObject({ status: 'completed', attempt: 3 });
    const attempts = await api.client.listAttempts(id);
    expect(attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'retrying'],
      [2, 'retrying'],
      [3, 'completed'],
    ]);
    for (const a of attempts) expect(a).toMatchObject({ worker_id: worker.id, started_at: expect.any(String), ended_at: expect.any(String) });
    expect(attempts[0].error).toMatchObject({ type: 'Error', message: 'flaky on attempt 1', retryable: true, stack: expect.stringContaining('flaky on attempt 1') });
    // The execution's own error never carries a stack.
    expect(JSON.stringify(await api.client.get(id))).not.toContain('stack');
  });

  test('an attempt whose worker stopped renewing its lease is kept as lost, and the next as in progress', async () => {
    await registerTask(api.db, hangs.name);
    const id = await schedule(hangs.name);
    // A worker that claims it and dies at once: its lease lapses, and a live worker takes over.
    await claimExecutions(api.db, [hangs.name], 1, 60_000, '00000000-0000-4000-8000-000000000001');
    await queryRows(api.db, "UPDATE stepwise.executions SET due_at = now() - interval '1 second' WHERE id = ?", [id]);
    const taker = await startWorker(api.t, [hangs] as never, { pollIntervalMs: 50, shutdownGraceMs: 100 });
    try {
      await waitUntil(async () => (await api.client.listAttempts(id)).length === 2, 'the takeover');
      const attempts = await api.client.listAttempts(id);
      expect(attempts[0]).toMatchObject({ attempt: 1, outcome: 'lost', worker_id: '00000000-0000-4000-8000-000000000001', ended_at: expect.any(String) });
      expect(attempts[1]).toMatchObject({ attempt: 2, outcome: null, worker_id: taker.id, ended_at: null });
    } finally {
      await taker.stop();
    }
    // Stopped while its handler hung: the attempt was handed back.
    expect((await api.client.listAttempts(id))[1]).toMatchObject({ attempt: 2, outcome: 'released' });
    await api.client.cancel(id);
  });

  test('an unknown execution has no attempts: 404', async () => {
    const res = await api.call('GET', '/api/v1/executions/0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10/attempts');
    expect(res.status).toBe(404);
  });
});

describe('retry from the failure', () => {
  test('a failed execution resumes at the step that failed: completed steps do not run again, the budget is fresh', async () => {
    broken.add('fix-1');
    const id = await schedule(fixable.name, { key: 'fix-1' });
    expect(await finished(id)).toMatchObject({ status: 'failed', error: { type: 'StepFailedError' } });
    expect(runs.get('call:fix-1')).toBe(2);
    broken.delete('fix-1');
    expect(await api.client.retry(id)).toEqual({ execution_id: id, status: 'pending' });
    expect(await finished(id)).toMatchObject({ status: 'completed', output: 3, error: null });
    expect(runs.get('prepare:fix-1')).toBe(1);
    expect(runs.get('call:fix-1')).toBe(3);
    const [, call] = await api.client.listSteps(id);
    expect(call).toMatchObject({ name: 'call', status: 'completed', error: null });
    expect(call.failed_attempts.map((f) => f.attempt)).toEqual([1, 2]);
    expect((await api.client.listAttempts(id)).map((a) => a.outcome)).toEqual(['failed', 'completed']);
  });

  test("a retried step that fails again has a fresh budget: it is tried the policy's attempts again", async () => {
    broken.add('fix-2');
    const id = await schedule(fixable.name, { key: 'fix-2' });
    expect(await finished(id)).toMatchObject({ status: 'failed' });
    await api.client.retry(id);
    expect(await finished(id)).toMatchObject({ status: 'failed' });
    expect(runs.get('call:fix-2')).toBe(4);
    broken.delete('fix-2');
  });

  test('a cancelled execution resumes where its cancel cut it short, and its cascaded children with it', async () => {
    const id = await schedule(parent.name);
    const childId = await waitUntil(async () => {
      const page = await api.client.list({ parent_execution_id: id });
      return page.executions[0]?.status === 'waiting' ? page.executions[0].execution_id : undefined;
    }, 'the child to wait');
    await api.client.cancel(id);
    expect(await getExecution(api.db, childId)).toMatchObject({ status: 'cancelled' });
    await api.client.retry(id);
    await waitUntil(async () => (await api.client.get(childId)).waiting_for_events.length === 1, 'the retried child to wait again');
    await api.client.sendEvent(childId, 'go', 'now');
    expect(await finished(id)).toMatchObject({ status: 'completed', output: { before: 'b', child: 'now' } });
    expect((await api.client.listSteps(id))[0]).toMatchObject({ name: 'before', status: 'completed' });
    expect((await api.client.listAttempts(id)).map((a) => a.outcome)).toEqual(['cancelled', 'completed']);
  });

  test('a pending, running, waiting or completed execution is not retryable: 409 execution_not_retryable', async () => {
    const id = await schedule(quick.name);
    await finished(id);
    const res = await api.call('POST', `/api/v1/executions/${id}/retry`);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: { code: 'execution_not_retryable' } });
  });

  test('of ten concurrent retries of a failed execution exactly one wins', async () => {
    broken.add('race');
    const id = await schedule(fixable.name, { key: 'race' });
    await finished(id);
    broken.delete('race');
    const answers = await Promise.all(Array.from({ length: 10 }, () => api.call('POST', `/api/v1/executions/${id}/retry`)));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(9);
    expect(await finished(id)).toMatchObject({ status: 'completed' });
  });
  test('retries racing cancels and the worker\'s claim: a retry wins only after a cancel, and the end is one of theirs', async () => {
    for (let round = 0; round < 5; round++) {
      const key = `race-cancel-${round}`;
      broken.add(key);
      const id = await schedule(fixable.name, { key });
      await finished(id);
      broken.delete(key);
      const calls = Array.from({ length: 10 }, (_, i) => api.call('POST', `/api/v1/executions/${id}/${i % 2 === 0 ? 'retry' : 'cancel'}`));
      const answers = await Promise.all(calls);
      const won = (kind: number) => answers.filter((a, i) => i % 2 === kind && a.status === 200).length;
      expect(answers.every((a) => a.status === 200 || a.status === 409)).toBe(true);
      // Each change is serialized on the row: a retry wins only on a failed or cancelled execution, so
      // after the first, each further retry win needs a cancel in between (a cancel of a cancelled
      // execution answers 200 too, so cancels may outnumber them).
      expect(won(0)).toBeGreaterThanOrEqual(1);
      expect(won(1)).toBeGreaterThanOrEqual(won(0) - 1);
      const end = await finished(id);
      if (end.status === 'cancelled') expect(won(1)).toBeGreaterThanOrEqual(won(0));
      else expect(end).toMatchObject({ status: 'completed', output: 3 });
      const attempts = await api.client.listAttempts(id);
      expect(attempts[0]).toMatchObject({ attempt: 1, outcome: 'failed' });
      // Cancelled before a worker claimed it again, the last attempt is still the failed one.
      expect(attempts.at(-1)?.outcome).toEqual(end.status === 'completed' ? 'completed' : expect.stringMatching(/^(failed|cancelled)$/));
      // The step that completed before the failure ran once, whoever won.
      expect(runs.get(`prepare:${key}`)).toBe(1);
    }
  });
});

describe('operator metrics', () => {
  test('/metrics counts retries, bulk actions by result, and pause requests', async () => {
    const read = async () => (await api.call('GET', '/metrics')).text as string;
    const value = (text: string, series: string) => Number(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
    const before = await read();
    broken.add('metrics');
    const id = await schedule(fixable.name, { key: 'metrics' });
    await finished(id);
    broken.delete('metrics');
    await api.client.retry(id);
    await finished(id);
    await api.client.pauseTask(quick.name);
    const parked = [await schedule(quick.name), await schedule(quick.name)];
    expect(await api.client.bulkCancel({ task: quick.name, status: 'pending' })).toEqual({ matched: 2, changed: 2, next_cursor: null });
    expect(await api.client.bulkRetry({ task: quick.name, status: 'cancelled' })).toEqual({ matched: 2, changed: 2, next_cursor: null });
    await api.client.resumeTask(quick.name);
    for (const parkedId of parked) await finished(parkedId);
    const after = await read();
    const delta = (series: string) => value(after, series) - value(before, series);
    expect(delta('stepwise_operator_retries_total{source="single"}')).toBe(1);
    expect(delta('stepwise_operator_retries_total{source="bulk"}')).toBe(2);
    expect(delta('stepwise_bulk_actions_total{action="cancel"}')).toBe(1);
    expect(delta('stepwise_bulk_actions_total{action="retry"}')).toBe(1);
    expect(delta('stepwise_bulk_executions_total{action="cancel",result="changed"}')).toBe(2);
    expect(delta('stepwise_bulk_executions_total{action="retry",result="unchanged"}')).toBe(0);
    expect(delta('stepwise_task_pause_requests_total{action="pause"}')).toBe(1);
    expect(delta('stepwise_task_pause_requests_total{action="resume"}')).toBe(1);
  });
});

describe('bulk actions', () => {
  test('bulk-cancel and bulk-retry change each match in its own statement and count what they did', async () => {
    await api.client.pauseTask(sleepy.name);
    try {
      const ids = [];
      for (let i = 0; i < 5; i++) ids.push(await schedule(sleepy.name));
      expect(await api.client.bulkCancel({ task: sleepy.name, limit: 3 })).toEqual({ matched: 3, changed: 3, next_cursor: null });
      expect(await api.client.bulkCancel({ task: sleepy.name })).toEqual({ matched: 2, changed: 2, next_cursor: null });
      expect(await api.client.bulkCancel({ task: sleepy.name, status: 'completed' })).toEqual({ matched: 0, changed: 0, next_cursor: null });
      expect(await api.client.bulkRetry({ task: sleepy.name, status: 'cancelled' })).toEqual({ matched: 5, changed: 5, next_cursor: null });
      for (const id of ids) expect((await api.client.get(id)).status).toBe('pending');
    } finally {
      await api.client.resumeTask(sleepy.name);
    }
  });

  test('a filter over 10,000, or with a bad date, is 422', async () => {
    for (const body of ['{"limit":10001}', '{"created_after":"yesterday"}', '{"status":"bogus"}']) {
      const res = await api.call('POST', '/api/v1/executions/bulk-cancel', { headers: JSON_HEADERS, body });
      expect(res.status).toBe(422);
    }
  });
});

describe('pause and resume', () => {
  test('a paused task keeps its executions pending; resuming starts them at once, not at the next poll', async () => {
    // The only worker of both tasks polls once a minute: only notifications wake it in this test.
    const slow = await startWorker(api.t, [idle, marker] as never, { pollIntervalMs: 60_000 });
    try {
      expect(await api.client.pauseTask(idle.name)).toEqual({ name: idle.name, paused: true });
      expect((await api.client.listTasks()).find((t) => t.name === idle.name)?.paused).toBe(true);
      const id = await schedule(idle.name);
      // One claim statement covers both tasks: once the marker ran, a claim has skipped the paused one.
      expect(await finished(await schedule(marker.name))).toMatchObject({ status: 'completed' });
      expect((await api.client.get(id)).status).toBe('pending');
      expect(await api.client.resumeTask(idle.name)).toEqual({ name: idle.name, paused: false });
      expect(await finished(id)).toMatchObject({ status: 'completed', output: 'ran' });
    } finally {
      await slow.stop();
    }
  });

  test('a waiting execution of a paused task keeps the event it is sent and resumes with it after the resume', async () => {
    const id = await schedule(waitsForGo.name);
    await waitUntil(async () => (await api.client.get(id)).status === 'waiting', 'the child to wait for go', 10_000, 20);
    await api.client.pauseTask(waitsForGo.name);
    try {
      expect(await api.client.sendEvent(id, 'go', { n: 1 })).toMatchObject({ status: 'delivered' });
      // A quick execution of another task of the same worker completes: its claims ran and skipped this one.
      expect(await finished(await schedule(quick.name))).toMatchObject({ status: 'completed' });
      expect((await api.client.get(id)).status).toBe('waiting');
    } finally {
      await api.client.resumeTask(waitsForGo.name);
    }
    expect(await finished(id)).toMatchObject({ status: 'completed', output: { n: 1 } });
  });

  test('pausing a task nobody registered is 404 task_not_found', async () => {
    const res = await api.call('POST', '/api/v1/tasks/no-such-task/pause');
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: { code: 'task_not_found' } });
  });
});
