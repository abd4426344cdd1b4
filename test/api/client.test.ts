// The typed client (`stepwise-workflows/client`): helpers, errors and the wait loop.
import '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { completeAs, createExecutionIn, registerTask, uniqueTask } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { createStepwiseClient, StepwiseApiError, StepwiseWaitTimeoutError } from 'stepwise-workflows/client';
import { newExecutionId } from '../../src/domain/ids';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi({ tokens: ['client-token'] });
});
afterAll(async () => {
  await api.close();
});

describe('stepwise-workflows/client', () => {
  test('schedule, get, list, cancel, listSteps and listTasks return typed data', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const scheduled = await api.client.schedule(task, { n: 1 }, { idempotencyKey: `c-${task}` });
    expect(scheduled).toMatchObject({ task, status: 'pending', created: true });
    expect((await api.client.schedule(task, { n: 1 }, { idempotencyKey: `c-${task}` })).created).toBe(false);
    expect((await api.client.get(scheduled.execution_id)).data).toEqual({ n: 1 });
    expect((await api.client.list({ task })).executions.map((e) => e.execution_id)).toEqual([scheduled.execution_id]);
    expect(await api.client.listSteps(scheduled.execution_id)).toEqual([]);
    expect((await api.client.listTasks()).some((t) => t.name === task)).toBe(true);
    expect(await api.client.cancel(scheduled.execution_id)).toEqual({ execution_id: scheduled.execution_id, status: 'cancelled' });
  });

  test('server errors surface as StepwiseApiError with code, status, details and the request id', async () => {
    const err = await api.client.list({ limit: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StepwiseApiError);
    expect(err).toMatchObject({ code: 'invalid_data', status: 422, details: [{ path: 'query/limit' }] });
    expect((err as StepwiseApiError).requestId).toMatch(/[0-9a-f-]{36}/);
    await expect(api.clientWith(undefined).listTasks()).rejects.toMatchObject({ code: 'unauthorized', status: 401 });
    await expect(api.client.get(newExecutionId())).rejects.toMatchObject({ code: 'execution_not_found', status: 404 });
  });

  test('a non-envelope error answer becomes code unexpected_response', async () => {
    const client = createStepwiseClient({ baseUrl: 'http://stepwise.invalid', fetch: async () => new Response('<html>bad gateway</html>', { status: 502 }) });
    await expect(client.listTasks()).rejects.toMatchObject({ code: 'unexpected_response', status: 502 });
  });

  test('wait loops long-polls until the execution ends', async () => {
    const e = await createExecutionIn(api.client, api.db, 'running');
    let polls = 0;
    const counting = createStepwiseClient({
      baseUrl: api.api.url,
      token: 'client-token',
      fetch: async (req) => {
        if (req.url.includes('/wait')) polls++;
        return api.fetch(req);
      },
    });
    const done = counting.wait(e.id, { timeoutSeconds: 1 });
    await waitUntil(() => polls >= 2, 'a second long-poll', 10000);
    await completeAs(api.db, e.lease!, 'finished');
    expect(await done).toMatchObject({ status: 'completed', output: 'finished' });
  });

  test('wait gives up at its deadline with StepwiseWaitTimeoutError carrying the last status', async () => {
    const e = await createExecutionIn(api.client, api.db, 'waiting');
    const started = Date.now();
    const err = await api.client.wait(e.id, { timeoutSeconds: 30, deadlineMs: 1200 }).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(StepwiseWaitTimeoutError);
    expect(err).toMatchObject({ executionId: e.id, lastStatus: 'waiting' });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  test('wait retries through a 503 and a network failure', async () => {
    const e = await createExecutionIn(api.client, api.db, 'completed');
    let calls = 0;
    const flaky = createStepwiseClient({
      baseUrl: api.api.url,
      token: 'client-token',
      fetch: async (req) => {
        calls++;
        if (calls === 1) return new Response(JSON.stringify({ error: { code: 'service_unavailable', message: 'down' } }), { status: 503, headers: { 'Retry-After': '0' } });
        if (calls === 2) throw new TypeError('fetch failed');
        return api.fetch(req);
      },
    });
    expect((await flaky.wait(e.id, { deadlineMs: 10000 })).status).toBe('completed');
    expect(calls).toBe(3);
  });

  test('sendEvent delivers any JSON value, null by default', async () => {
    const e = await createExecutionIn(api.client, api.db, 'waiting');
    expect(await api.client.sendEvent(e.id, 'approval')).toMatchObject({ status: 'delivered', execution_id: e.id, event_name: 'approval', execution_status: 'waiting' });
    expect((await api.client.listSteps(e.id))[0].result).toEqual({ payload: null });
  });

  test('raw exposes every operation of the contract with typed { data } | { error } answers', async () => {
    const { data, error, response } = await api.client.raw.GET('/api/v1/executions/{id}', { params: { path: { id: 'not-an-id' } } });
    expect(data).toBeUndefined();
    expect(response.status).toBe(404);
    expect(error?.error.code).toBe('execution_not_found');
  });
});
