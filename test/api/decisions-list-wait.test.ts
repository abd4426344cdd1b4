// PRODUCT.md §1, decisions about listing and long-polling: one named test per row.
import '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { claimExecution, createExecutionIn, failAs, registerTask, uniqueTask } from '../helpers/simulated-worker';
import { getSpec } from '../../src/api/spec';
import { validateRequest } from '../../src/api/validation';
import type { ApiState } from '../../src/api/state';
import { newExecutionId } from '../../src/domain/ids';
import { insertExecutions } from '../../src/store/executions';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

/** The query a request ends up with after validation (defaults applied, limits clamped). */
async function appliedQuery(operationId: string, params: Record<string, string>, query: Record<string, string>): Promise<Record<string, unknown>> {
  const ctx = { params, query, state: {} as ApiState };
  await validateRequest(getSpec().operations.get(operationId)!)(ctx as never, async () => undefined);
  return ctx.state.input!.query;
}

describe('list and wait decisions', () => {
  test('limit above 500 and timeout above 3600 are clamped to the maximum; the list response shows the limit applied', async () => {
    expect((await api.client.list({ limit: 501 })).limit).toBe(500);
    expect((await api.call('GET', '/api/v1/executions?limit=99999999')).body).toMatchObject({ limit: 500 });
    expect((await api.client.list({ limit: 500 })).limit).toBe(500);
    expect(await appliedQuery('waitForExecution', { id: newExecutionId() }, { timeout: '86400' })).toEqual({ timeout: 3600 });
    expect(await appliedQuery('waitForExecution', { id: newExecutionId() }, { timeout: '3600' })).toEqual({ timeout: 3600 });
    // Over HTTP a huge timeout is accepted (not 422): a cancelled execution answers at once.
    const task = uniqueTask();
    await registerTask(api.db, task);
    const { execution_id } = await api.client.schedule(task);
    await api.client.cancel(execution_id);
    expect((await api.call('GET', `/api/v1/executions/${execution_id}/wait?timeout=1000000`)).status).toBe(200);
  });

  test.each([
    ['/api/v1/executions?limit=0', 'query/limit'],
    ['/api/v1/executions?limit=-5', 'query/limit'],
    ['/api/v1/executions?offset=-1', 'query/offset'],
    ['/api/v1/executions?limit=2.5', 'query/limit'],
    ['/api/v1/executions?offset=abc', 'query/offset'],
    ['/api/v1/executions?limit=', 'query/limit'],
    ['/api/v1/executions?status=done', 'query/status'],
    ['/api/v1/executions?order=up', 'query/order'],
    ['/api/v1/executions?limit=1&limit=2', 'query/limit'],
    ['/api/v1/executions?offset=1e400', 'query/offset'],
    ['/api/v1/executions?limit=Infinity', 'query/limit'],
    ['/api/v1/executions?offset=3000000000', 'query/offset'],
    ['/api/v1/executions?colour=red', 'query/colour'],
    [`/api/v1/executions/${newExecutionId()}/wait?timeout=-1`, 'query/timeout'],
    [`/api/v1/executions/${newExecutionId()}/wait?timeout=0.5`, 'query/timeout'],
    [`/api/v1/executions/${newExecutionId()}/wait?timeout=soon`, 'query/timeout'],
  ])('%s is 422 invalid_data (limit < 1, offset < 0, timeout < 0, non-integers, unknown status or order, unknown parameters)', async (path, detailPath) => {
    const res = await api.call('GET', path);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: detailPath }] } });
  });

  test('list is ordered by created_at with ties broken by execution_id, so pages never skip or repeat rows', async () => {
    const task = uniqueTask('page');
    // One INSERT statement: every row gets the same created_at, so only the id breaks the ties.
    await insertExecutions(api.db, Array.from({ length: 23 }, (_, i) => ({ task, data: { i } })));
    await insertExecutions(api.db, Array.from({ length: 4 }, (_, i) => ({ task, data: { i } })));
    for (const order of ['asc', 'desc'] as const) {
      const seen: Array<{ id: string; at: string }> = [];
      for (let offset = 0; ; offset += 5) {
        const page = await api.client.list({ task, order, limit: 5, offset });
        expect(page.total).toBe(27);
        expect(page.offset).toBe(offset);
        if (page.executions.length === 0) break;
        seen.push(...page.executions.map((e) => ({ id: e.execution_id, at: e.created_at })));
      }
      expect(seen).toHaveLength(27);
      expect(new Set(seen.map((s) => s.id)).size).toBe(27);
      const sorted = [...seen].sort((x, y) => (x.at === y.at ? (x.id < y.id ? -1 : 1) : x.at < y.at ? -1 : 1));
      expect(seen).toEqual(order === 'asc' ? sorted : sorted.reverse());
    }
  });

  test('list items carry exactly execution_id, task, status, created_at, started_at and completed_at (PRODUCT.md §1), tags, priority and task_version', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const { execution_id } = await api.client.schedule(task, { secret: 'not listed' });
    const page = await api.client.list({ task, status: 'pending' });
    expect(page.executions).toHaveLength(1);
    expect(Object.keys(page.executions[0]).sort()).toEqual(['completed_at', 'created_at', 'execution_id', 'priority', 'started_at', 'status', 'tags', 'task', 'task_version']);
    expect(page.executions[0]).toMatchObject({ execution_id, task, status: 'pending', started_at: null, completed_at: null, tags: [], priority: 0, task_version: null });
  });

  test('wait on an execution that ends failed or cancelled answers 200 with that status, error and completed_at', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const failed = await api.client.schedule(task);
    const lease = await claimExecution(api.db, task, failed.execution_id);
    const waiting = api.client.wait(failed.execution_id, { timeoutSeconds: 20 });
    await failAs(api.db, lease, 'card declined');
    const f = await waiting;
    expect(f).toMatchObject({ status: 'failed', error: { type: 'Error', message: 'card declined', retryable: false } });
    expect(f.completed_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const cancelled = await api.client.schedule(task);
    await api.client.cancel(cancelled.execution_id);
    const c = await api.client.wait(cancelled.execution_id, { timeoutSeconds: 20 });
    expect(c).toMatchObject({ status: 'cancelled', error: { type: 'cancelled' } });
    expect(c.completed_at).not.toBeNull();
  });

  test('wait that times out with a pending, running or waiting execution answers 202 with the real status and a message', async () => {
    const states = await Promise.all((['pending', 'running', 'waiting'] as const).map((st) => createExecutionIn(api.client, api.db, st)));
    const answers = await Promise.all(
      states.map((e) => api.call('GET', `/api/v1/executions/${e.id}/wait?timeout=1`)),
    );
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202]);
    expect(answers.map((a) => (a.body as { status: string }).status)).toEqual(['pending', 'running', 'waiting']);
    for (const a of answers) expect((a.body as { message: string }).message).toMatch(/call again/);
  });

  test('wait on an unknown id is 404 execution_not_found, and timeout=0 answers at once', async () => {
    const missing = await api.call('GET', `/api/v1/executions/${newExecutionId()}/wait?timeout=5`);
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ error: { code: 'execution_not_found' } });
    const task = uniqueTask();
    await registerTask(api.db, task);
    const { execution_id } = await api.client.schedule(task);
    const started = Date.now();
    const now = await api.call('GET', `/api/v1/executions/${execution_id}/wait?timeout=0`);
    expect(now.status).toBe(202);
    expect(now.body).toMatchObject({ execution_id, status: 'pending' });
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
