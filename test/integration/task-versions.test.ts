// New code under running executions (PRODUCT.md §9): versions pin executions to the code they started
// on, patches let one version carry both paths, and an operator moves executions on purpose. Real
// workers (in process, started and stopped as a deploy would) over a real API server.
import pg from 'pg';
import { Registry } from 'prom-client';
import { defineTask } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import type { TaskContext } from '../../src/engine/task';
import { queryRows } from '../../src/store/db';
import { insertExecutions } from '../../src/store/executions';
import { upsertTasks } from '../../src/store/tasks';
import { claimExecutions } from '../../src/store/transitions/claim';
import { claimThrottledExecutions } from '../../src/store/transitions/claim-throttled';
import { returnUnstarted } from '../../src/store/transitions/release';
import { parseFlow } from '../../src/domain/flow';
import { checkChangeId } from '../../src/domain/version';
import { measureQueue } from '../../src/api/queue-metrics';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { uniqueTask } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

let api: TestApi;
const running: Worker[] = [];

beforeAll(async () => {
  api = await startTestApi();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((w) => w.stop()));
});
afterAll(async () => {
  await api.close();
});

/** A worker that replays on every resume (keepSuspended 0), as another process would. */
async function deploy(...tasks: Parameters<typeof defineTask>[0][]): Promise<Worker> {
  const worker = await startWorker(api.t, tasks.map((t) => defineTask(t)), { keepSuspended: 0, pollIntervalMs: 50 });
  running.push(worker);
  return worker;
}

async function retire(worker: Worker): Promise<void> {
  running.splice(running.indexOf(worker), 1);
  await worker.stop();
}

async function statusOf(id: string, status: string): Promise<void> {
  await waitUntil(async () => (await api.client.get(id)).status === status, `execution ${id} to be ${status}`);
}

/** An approval: a step, a wait for `go`, and the code version's answer. */
const approval = (name: string, version: string | undefined, answer: string) => ({
  name,
  version,
  async run(ctx: TaskContext) {
    await ctx.step('load', async () => 'loaded');
    await ctx.waitForEvent('go');
    return answer;
  },
});

const post = (path: string, body: unknown) => api.call('POST', path, { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

describe('versions pin executions', () => {
  test('an execution stays with the version it started on; nobody serving it is visible; an upgrade moves it', async () => {
    const task = uniqueTask('approval');
    const v1 = await deploy(approval(task, '1', 'v1'));
    const old = await api.client.schedule(task);
    await statusOf(old.execution_id, 'waiting');
    expect((await api.client.get(old.execution_id)).task_version).toBe('1');

    // The deploy: version 1 goes, version 2 comes; new executions start on it.
    await retire(v1);
    await deploy(approval(task, '2', 'v2'));
    const fresh = await api.client.schedule(task);
    await statusOf(fresh.execution_id, 'waiting');
    expect((await api.client.get(fresh.execution_id)).task_version).toBe('2');

    await api.client.sendEvent(old.execution_id, 'go');
    await api.client.sendEvent(fresh.execution_id, 'go');
    expect((await api.client.wait(fresh.execution_id, { timeoutSeconds: 10 })).output).toBe('v2');
    // Due since the event, yet version 2's worker (which just ran the other) leaves it alone.
    expect((await api.client.get(old.execution_id)).status).toBe('waiting');
    const [row] = await queryRows<{ due: boolean }>(api.db, 'SELECT due_at <= now() AS due FROM stepwise.executions WHERE id = ?', [old.execution_id]);
    expect(row.due).toBe(true);

    const versions = (await api.client.listTasks()).find((t) => t.name === task)?.versions;
    expect(versions).toEqual([
      { version: '2', current: true, workers: 1, pending: 0, running: 0, waiting: 0 },
      { version: '1', current: false, workers: 0, pending: 0, running: 0, waiting: 1 },
    ]);
    const registry = new Registry();
    measureQueue(registry, api.db);
    const metric = (await registry.getSingleMetric('stepwise_executions_unserved')?.get())?.values ?? [];
    expect(metric.filter((v) => v.labels.task === task)).toEqual([{ labels: { task, version: '1' }, value: 1 }]);

    const moved = await post(`/api/v1/executions/${old.execution_id}/upgrade`, { version: '2' });
    expect(moved.status).toBe(200);
    expect(moved.body).toEqual({ execution_id: old.execution_id, status: 'waiting', task_version: '2', previous_task_version: '1' });
    expect((await api.client.wait(old.execution_id, { timeoutSeconds: 10 })).output).toBe('v2');
  });

  test('a new version becomes current only once its worker is registered, so the old one keeps to its own', async () => {
    const task = uniqueTask('approval');
    const current = async () => (await queryRows<{ current_version: string }>(api.db, 'SELECT current_version FROM stepwise.tasks WHERE name = ?', [task]))[0].current_version;
    await deploy(approval(task, '1', 'v1'));
    // Hold the registry: version 2's worker cannot register while this transaction holds it. On a
    // connection of its own: holding one of the pool's, the test hung instead of failing without the fix.
    const holder = new pg.Client({ connectionString: api.t.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE stepwise.workers IN EXCLUSIVE MODE');
      const v2 = deploy(approval(task, '2', 'v2'));
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Were version 2 current now, version 1's worker would find it served by no live worker and
      // start new executions on version 1.
      expect(await current()).toBe('1');
      await holder.query('COMMIT');
      await v2;
    } finally {
      await holder.end();
    }
    expect(await current()).toBe('2');
    const fresh = await api.client.schedule(task);
    await statusOf(fresh.execution_id, 'waiting');
    expect((await api.client.get(fresh.execution_id)).task_version).toBe('2');
  });

  test('upgrade refuses what cannot move, with the envelope', async () => {
    const task = uniqueTask('approval');
    await deploy(approval(task, '3', 'v3'));
    const done = await api.client.schedule(task);
    await statusOf(done.execution_id, 'waiting');
    await api.client.sendEvent(done.execution_id, 'go');
    await statusOf(done.execution_id, 'completed');

    const completed = await post(`/api/v1/executions/${done.execution_id}/upgrade`, { version: '3' });
    expect(completed.status).toBe(409);
    expect(completed.body).toMatchObject({ error: { code: 'execution_not_upgradable', message: expect.stringContaining('is completed') } });

    const waiting = await api.client.schedule(task);
    await statusOf(waiting.execution_id, 'waiting');
    const unserved = await post(`/api/v1/executions/${waiting.execution_id}/upgrade`, { version: '4' });
    expect(unserved.status).toBe(409);
    expect(unserved.body).toMatchObject({ error: { code: 'task_version_not_served', message: `no live worker serves version "4" of task ${task}` } });
    const unversioned = await post(`/api/v1/executions/${waiting.execution_id}/upgrade`, { version: null });
    expect(unversioned.body).toMatchObject({ error: { code: 'task_version_not_served', message: `no live worker serves the unversioned code of task ${task}` } });
    expect((await api.client.get(waiting.execution_id)).task_version).toBe('3');

    expect((await post(`/api/v1/executions/00000000-0000-4000-8000-000000000000/upgrade`, { version: '3' })).status).toBe(404);
    for (const body of [{}, { version: 'two words' }, { version: 3 }, { version: '3', extra: true }]) {
      const bad = await post(`/api/v1/executions/${waiting.execution_id}/upgrade`, body);
      expect(bad.status).toBe(422);
      expect(bad.body).toMatchObject({ error: { code: 'invalid_data' } });
    }
    // The same version: nothing to change, and no error.
    expect((await post(`/api/v1/executions/${waiting.execution_id}/upgrade`, { version: '3' })).body).toMatchObject({ task_version: '3', previous_task_version: '3' });
  });

  test('a running execution moves only once its worker is gone', async () => {
    const task = uniqueTask('approval');
    await upsertTasks(api.db, [{ name: task, dataSchema: null, eventSchemas: {}, retry: null }]);
    // Claimed by a version-1 worker that then died: its lease runs, then expires.
    const [{ execution: { id } }] = await insertExecutions(api.db, [{ task, data: {} }]);
    expect((await claimExecutions(api.db, [{ name: task, version: '1' }], 1, 60_000)).map((c) => c.execution.id)).toEqual([id]);
    await deploy(approval(task, '2', 'v2'));
    const held = await post(`/api/v1/executions/${id}/upgrade`, { version: '2' });
    expect(held.status).toBe(409);
    expect(held.body).toMatchObject({ error: { code: 'execution_not_upgradable', message: expect.stringContaining('is running, and its worker holds it') } });

    await queryRows(api.db, `UPDATE stepwise.executions SET due_at = now() - interval '1 second' WHERE id = ?`, [id]);
    const moved = await post(`/api/v1/executions/${id}/upgrade`, { version: '2' });
    expect(moved.body).toEqual({ execution_id: id, status: 'running', task_version: '2', previous_task_version: '1' });
    await statusOf(id, 'waiting');
    expect((await api.client.listAttempts(id)).map((a) => a.outcome)).toEqual(['lost', null]);
    await api.client.sendEvent(id, 'go');
    expect((await api.client.wait(id, { timeoutSeconds: 10 })).output).toBe('v2');
  });

  test('bulk-upgrade moves the executions of one version and leaves the others', async () => {
    const task = uniqueTask('approval');
    const v1 = await deploy(approval(task, '1', 'v1'));
    const olds = await Promise.all([1, 2, 3].map(() => api.client.schedule(task)));
    for (const o of olds) await statusOf(o.execution_id, 'waiting');
    await retire(v1);
    await deploy(approval(task, '2', 'v2'));
    const fresh = await api.client.schedule(task);
    await statusOf(fresh.execution_id, 'waiting');

    expect((await post('/api/v1/executions/bulk-upgrade', { task, version: '5', task_version: '1' })).body).toMatchObject({ error: { code: 'task_version_not_served' } });
    const result = await post('/api/v1/executions/bulk-upgrade', { task, version: '2', task_version: '1' });
    expect(result.status).toBe(200);
    expect(result.body).toEqual({ matched: 3, changed: 3, next_cursor: null });
    expect((await post('/api/v1/executions/bulk-upgrade', { task })).status).toBe(422);

    for (const o of olds) await api.client.sendEvent(o.execution_id, 'go');
    for (const o of olds) expect((await api.client.wait(o.execution_id, { timeoutSeconds: 10 })).output).toBe('v2');
  });
});

describe('claims by version', () => {
  test('a claim pins what never started, and takes only its own version of the rest', async () => {
    const task = uniqueTask('claims');
    await upsertTasks(api.db, [{ name: task, dataSchema: null, eventSchemas: {}, retry: null }]);
    await insertExecutions(api.db, [{ task, data: { n: 1 } }]);
    const [first] = await claimExecutions(api.db, [{ name: task, version: '1' }], 10, 60_000);
    expect(first.execution.data).toEqual({ n: 1 });
    // Back to due, as a retry or a woken wait would be: version 2 may not take it, version 1 may.
    await queryRows(api.db, `UPDATE stepwise.executions SET status = 'pending', due_at = now() WHERE id = ?`, [first.execution.id]);
    expect(await claimExecutions(api.db, [{ name: task, version: '2' }], 10, 60_000)).toEqual([]);
    expect(await claimExecutions(api.db, [task], 10, 60_000)).toEqual([]);
    expect((await claimExecutions(api.db, [{ name: task, version: '1' }], 10, 60_000)).map((c) => c.execution.id)).toEqual([first.execution.id]);
    // An expired lease is taken over by its own version only.
    await queryRows(api.db, `UPDATE stepwise.executions SET due_at = now() - interval '1 second' WHERE id = ?`, [first.execution.id]);
    expect(await claimExecutions(api.db, [{ name: task, version: '2' }], 10, 60_000)).toEqual([]);
    expect((await claimExecutions(api.db, [{ name: task, version: '1' }], 10, 60_000)).map((c) => c.previousStatus)).toEqual(['running']);
  });

  test('a claim handed back unstarted unpins what had never started, and keeps the pin of the rest', async () => {
    const task = uniqueTask('returned');
    await upsertTasks(api.db, [{ name: task, dataSchema: null, eventSchemas: {}, retry: null }]);
    await insertExecutions(api.db, [{ task, data: {} }]);
    const version = async (id: string) => (await queryRows<{ v: string | null }>(api.db, 'SELECT task_version AS v FROM stepwise.executions WHERE id = ?', [id]))[0].v;
    const [fresh] = await claimExecutions(api.db, [{ name: task, version: '1' }], 1, 60_000);
    expect(await version(fresh.execution.id)).toBe('1');
    await returnUnstarted(api.db, [{ id: fresh.execution.id, token: fresh.execution.leaseToken as string, previousStatus: 'pending' }]);
    expect(await version(fresh.execution.id)).toBeNull();
    // Started once (attempt 2 now), it keeps its version when handed back.
    const [again] = await claimExecutions(api.db, [{ name: task, version: '2' }], 1, 60_000);
    await queryRows(api.db, `UPDATE stepwise.executions SET status = 'pending', due_at = now() WHERE id = ?`, [again.execution.id]);
    const [retry] = await claimExecutions(api.db, [{ name: task, version: '2' }], 1, 60_000);
    await returnUnstarted(api.db, [{ id: retry.execution.id, token: retry.execution.leaseToken as string, previousStatus: 'pending' }]);
    expect(await version(retry.execution.id)).toBe('2');
  });

  test.each([
    ['unkeyed', { concurrency: { limit: 5 } }],
    ['keyed', { concurrency: { limit: 5, key: '/tenant' } }],
  ])('a throttled claim (%s) takes only its own version', async (_kind, flow) => {
    const task = uniqueTask('throttled');
    const policy = parseFlow(task, flow);
    await upsertTasks(api.db, [{ name: task, dataSchema: null, eventSchemas: {}, retry: null, flow: policy }]);
    await insertExecutions(api.db, [{ task, data: { tenant: 'a' } }]);
    const claim = (version: string) => claimThrottledExecutions(api.db, { name: task, version }, policy, 10, 60_000, null, '');
    const [first] = (await claim('1')).claimed;
    await queryRows(api.db, `UPDATE stepwise.executions SET status = 'waiting', due_at = now() WHERE id = ?`, [first.execution.id]);
    expect((await claim('2')).claimed).toEqual([]);
    expect((await claim('1')).claimed.map((c) => c.execution.id)).toEqual([first.execution.id]);
  });
});

describe('patches', () => {
  /** The code before the change: load, wait, send. */
  const before = (name: string) => ({
    name,
    async run(ctx: TaskContext) {
      await ctx.step('load', async () => 'loaded');
      await ctx.waitForEvent('go');
      await ctx.step('send', async () => 'sent');
      return { path: 'old' };
    },
  });
  /** The change: a new step before the wait, under a patch. */
  const patched = (name: string) => ({
    name,
    async run(ctx: TaskContext) {
      await ctx.step('load', async () => 'loaded');
      const withCheck = ctx.patched('check-stock');
      if (withCheck) await ctx.step('check', async () => 'in stock');
      await ctx.waitForEvent('go');
      await ctx.step('send', async () => 'sent');
      return { path: withCheck ? 'new' : 'old', again: ctx.patched('check-stock') };
    },
  });
  /** The clean-up release: only the new path, which an old history must not run. */
  const deprecated = (name: string) => ({
    name,
    async run(ctx: TaskContext) {
      await ctx.step('load', async () => 'loaded');
      ctx.deprecatePatch('check-stock');
      await ctx.step('check', async () => 'in stock');
      await ctx.waitForEvent('go');
      await ctx.step('send', async () => 'sent');
      return { path: 'new' };
    },
  });
  const kinds = async (id: string) => (await api.client.listSteps(id)).map((s) => `${s.kind}:${s.name}:${s.status}`);

  test('patched() answers false replaying an old history and true on a new one, recorded as a marker', async () => {
    const task = uniqueTask('patched');
    const old = await deploy(before(task));
    const a = await api.client.schedule(task);
    await statusOf(a.execution_id, 'waiting');
    await retire(old);

    await deploy(patched(task));
    const b = await api.client.schedule(task);
    await statusOf(b.execution_id, 'waiting');
    expect(await kinds(b.execution_id)).toEqual(['step:load:completed', 'patch:check-stock:completed', 'step:check:completed', 'event:go:in_progress']);
    expect((await api.client.get(b.execution_id)).steps_completed).toBe(2);

    // Both replay (the worker keeps no handler): a from the old history, b from the new one.
    await api.client.sendEvent(a.execution_id, 'go');
    await api.client.sendEvent(b.execution_id, 'go');
    expect((await api.client.wait(a.execution_id, { timeoutSeconds: 10 })).output).toEqual({ path: 'old', again: false });
    expect((await api.client.wait(b.execution_id, { timeoutSeconds: 10 })).output).toEqual({ path: 'new', again: true });
    expect(await kinds(a.execution_id)).toEqual(['step:load:completed', 'event:go:completed', 'step:send:completed']);
    expect(await kinds(b.execution_id)).toEqual(['step:load:completed', 'patch:check-stock:completed', 'step:check:completed', 'event:go:completed', 'step:send:completed']);
  });

  test('deprecatePatch() runs new histories and fails an old one with both sides named', async () => {
    const task = uniqueTask('deprecated');
    const old = await deploy(before(task));
    const a = await api.client.schedule(task);
    await statusOf(a.execution_id, 'waiting');
    await retire(old);
    const withPatch = await deploy(patched(task));
    const b = await api.client.schedule(task);
    await statusOf(b.execution_id, 'waiting');
    await retire(withPatch);

    await deploy(deprecated(task));
    const c = await api.client.schedule(task);
    await statusOf(c.execution_id, 'waiting');
    for (const e of [a, b, c]) await api.client.sendEvent(e.execution_id, 'go');
    expect((await api.client.wait(b.execution_id, { timeoutSeconds: 10 })).output).toEqual({ path: 'new' });
    expect((await api.client.wait(c.execution_id, { timeoutSeconds: 10 })).output).toEqual({ path: 'new' });
    const failed = await api.client.wait(a.execution_id, { timeoutSeconds: 10 });
    expect(failed.status).toBe('failed');
    expect(failed.error).toEqual({
      type: 'NonDeterminismError',
      message: expect.stringContaining('history has no operation there, the handler called patch "check-stock"; the history was recorded before this change'),
      retryable: false,
      divergence: { operation: 2, recorded: null, called: { kind: 'patch', name: 'check-stock' } },
    });
    // deprecatePatch records the marker, so that the release with patched() could replay c too.
    expect(await kinds(c.execution_id)).toEqual(['step:load:completed', 'patch:check-stock:completed', 'step:check:completed', 'event:go:completed', 'step:send:completed']);
  });

  test('a change of operation fails the replay naming the recorded and the called one', async () => {
    const task = uniqueTask('diverged');
    const old = await deploy(before(task));
    const a = await api.client.schedule(task);
    await statusOf(a.execution_id, 'waiting');
    await retire(old);
    await deploy({
      name: task,
      async run(ctx: TaskContext) {
        await ctx.sleep('load', 10);
        return null;
      },
    });
    await api.client.sendEvent(a.execution_id, 'go');
    const failed = await api.client.wait(a.execution_id, { timeoutSeconds: 10 });
    expect(failed.error).toEqual({
      type: 'NonDeterminismError',
      message: 'replay diverged at operation #1: history has step "load", the handler called sleep "load"',
      retryable: false,
      divergence: { operation: 1, recorded: { kind: 'step', name: 'load' }, called: { kind: 'sleep', name: 'load' } },
    });
  });

  test('a bad version or change id is refused with the option named', () => {
    expect(() => defineTask({ name: 't', version: 'two words', run: async () => null })).toThrow('task t: version "two words" must be 1-64 letters, digits or ._:+- characters, or a non-negative integer');
    expect(() => defineTask({ name: 't', version: -1, run: async () => null })).toThrow('task t: version -1 must be');
    expect(defineTask({ name: 't', version: 2, run: async () => null }).version).toBe(2);
    expect(() => checkChangeId('ctx.patched', '')).toThrow('ctx.patched(""): a change id is 1-200 letters, digits or ._:+/- characters');
    expect(() => checkChangeId('ctx.deprecatePatch', 'two words')).toThrow('ctx.deprecatePatch("two words")');
    expect(() => checkChangeId('ctx.patched', 'orders/check-stock-2026.11')).not.toThrow();
  });
});
