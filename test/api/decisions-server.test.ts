// PRODUCT.md §1, decisions about routing, the database being away and unexpected failures.
import { recordResponse } from '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { createTcpProxy, type TcpProxy } from '../helpers/tcp-proxy';
import { waitUntil } from '../helpers/wait-until';
import { newExecutionId } from '../../src/domain/ids';
import { createDb, type Db } from '../../src/store/db';

describe('routing and failure decisions', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi();
  });
  afterAll(async () => {
    await api.close();
  });

  test('an unknown path is 404 route_not_found', async () => {
    // (`/` itself leads to the dashboard: root-redirect.test.ts.)
    for (const path of ['/api/v1/nothing', '/api/v2/executions', '/api', '/api/v1/executions/x/y/z', '/healthz/extra']) {
      const res = await api.call('GET', path);
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ error: { code: 'route_not_found' } });
    }
  });

  test('a wrong method on a known path is 405 method_not_allowed with Allow', async () => {
    const cases: Array<[string, string, string[]]> = [
      ['DELETE', '/api/v1/executions', ['GET', 'POST']],
      ['PUT', `/api/v1/executions/${newExecutionId()}`, ['GET']],
      ['GET', `/api/v1/executions/${newExecutionId()}/cancel`, ['POST']],
      ['POST', '/healthz', ['GET']],
      ['PATCH', '/api/v1/tasks', ['GET']],
    ];
    for (const [method, path, allowed] of cases) {
      const res = await api.call(method, path);
      expect(res.status).toBe(405);
      expect(res.body).toMatchObject({ error: { code: 'method_not_allowed' } });
      const allow = (res.headers.get('allow') ?? '').split(/,\s*/);
      for (const m of allowed) expect(allow).toContain(m);
      expect(allow).not.toContain(method);
    }
  });

  test('anything unexpected is 500 internal_error whose message holds no stack, SQL or secret', async () => {
    // A worker registered a schema Ajv cannot compile: an internal failure, not the client's fault.
    const task = uniqueTask('broken');
    await registerTask(api.db, task, { type: 'object', properties: { a: { $ref: '#/definitions/missing-secret-name' } } });
    const res = await api.call('POST', '/api/v1/executions', { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ task, data: {} }) });
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: { code: 'internal_error', message: 'an internal error occurred' } });
    expect(res.text).not.toMatch(/missing-secret-name|at .*\.ts|SELECT|stepwise\.tasks/);
    // The detail went to the log, under the request id.
    const requestId = res.headers.get('x-request-id') as string;
    const line = api.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.requestId === requestId && l.msg === 'request failed');
    expect(JSON.stringify(line)).toContain('missing-secret-name');
    // ... as a description: no stack trace in any log line (issue 5).
    expect(api.logs.lines.join('\n')).not.toMatch(/\\n\s+at |\.ts:\d+:\d+/);
  });
});

describe('database unreachable', () => {
  let t: TestDatabase;
  let proxy: TcpProxy;
  let proxiedDb: Db;
  let api: TestApi;

  const realLog = console.log;
  beforeAll(async () => {
    // knex reports each refused connection on console.log; those are this test's point, not noise to show.
    jest.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
      if (!/^(Acquire connection error|Connection Error)/.test(String(args[0]))) realLog(...args);
    });
    t = await createTestDatabase();
    const target = new URL(t.url);
    proxy = await createTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    // The proxy is not started: connections to it are refused, as to a database that is down.
    proxiedDb = createDb({ url: proxy.urlThrough(t.url), acquireTimeoutMs: 1000 });
    api = await startTestApi({ db: { db: proxiedDb, url: proxy.urlThrough(t.url) } });
  });
  afterAll(async () => {
    await api.close();
    await proxiedDb.destroy();
    await proxy.stop();
    await t.drop();
    jest.restoreAllMocks();
  });

  test('while the database is unreachable the API answers 503 service_unavailable with Retry-After, /readyz 503 and /healthz 200; it recovers by itself', async () => {
    expect((await api.call('GET', '/healthz')).status).toBe(200);
    const ready = await api.call('GET', '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ error: { code: 'service_unavailable' } });
    const id = newExecutionId();
    const answers = [
      await api.call('GET', `/api/v1/executions/${id}`),
      await api.call('GET', '/api/v1/executions'),
      await api.call('GET', '/api/v1/tasks'),
      await api.call('POST', '/api/v1/executions', { headers: { 'Content-Type': 'application/json' }, body: '{"task":"t","data":{}}' }),
      await api.call('GET', `/api/v1/executions/${id}/wait?timeout=0`),
      // A long-poll that would wait is answered outside Koa (detached-responses.ts): the same 503.
      await api.call('GET', `/api/v1/executions/${id}/wait?timeout=5`),
    ];
    for (const res of answers) {
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ error: { code: 'service_unavailable' } });
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(res.text).not.toMatch(/ECONNREFUSED|127\.0\.0\.1/);
    }

    await proxy.start();
    await waitUntil(async () => (await api.call('GET', '/readyz')).status === 200, '/readyz to recover');
    expect((await api.call('GET', '/api/v1/executions')).status).toBe(200);
    // And once more down and up: a crash of a database that was reachable.
    await proxy.stop();
    await waitUntil(async () => (await api.call('GET', '/api/v1/tasks')).status === 503, 'the API to notice the outage');
    await proxy.start();
    await waitUntil(async () => (await api.call('GET', '/api/v1/tasks')).status === 200, 'the API to recover again');
  });

  test('after an outage, a long-poll is answered again as soon as its execution ends', async () => {
    await proxy.start();
    const task = uniqueTask();
    await registerTask(t.db, task);
    const { execution_id } = await api.client.schedule(task);
    const answer = fetch(`${api.api.url}/api/v1/executions/${execution_id}/wait?timeout=20`);
    await waitUntil(async () => (await api.client.cancel(execution_id)).status === 'cancelled', 'the cancel');
    const rec = await recordResponse('GET', `/api/v1/executions/${execution_id}/wait`, await answer);
    expect(rec).toMatchSpec();
    expect(rec.status).toBe(200);
  });
});
