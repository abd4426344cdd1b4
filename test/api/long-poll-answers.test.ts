// A long-poll that waits is answered outside Koa (src/api/detached-responses.ts): its answer must be
// the one Koa would have written (headers, request id, envelope), the access log and the metrics must
// still see it, and the Koa context must not outlive the wait.
import v8 from 'node:v8';
import vm from 'node:vm';
import Koa from 'koa';
import { recordResponse } from '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { completeAs, createExecutionIn } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const ROUTE = '/api/v1/executions/:id/wait';

async function longPollsWaiting(api: TestApi): Promise<number> {
  const res = await api.call('GET', '/metrics');
  return Number(/^stepwise_http_long_polls_waiting (\d+)/m.exec(res.text)?.[1] ?? NaN);
}

/** The access log's line for one request id. */
function accessLogLine(api: TestApi, requestId: string): Record<string, unknown> | undefined {
  return api.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.requestId === requestId && l.msg === 'request completed');
}

/** Header names and values, less those that differ between any two answers. */
function comparableHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    if (!['date', 'x-request-id', 'content-length'].includes(name)) out[name] = value;
  });
  return out;
}

describe('a long-poll that waits', () => {
  let api: TestApi;
  beforeAll(async () => {
    // Debug: the access log writes a line for every request. No fallback re-check within the tests.
    api = await startTestApi({ logLevel: 'debug', http: { waitPollIntervalMs: 600000 } });
  });
  afterAll(async () => {
    await api.close();
  });

  test('answers 200 with the headers, request id, access-log line and metrics Koa gives any answer', async () => {
    const e = await createExecutionIn(api.client, api.db, 'running');
    const started = Date.now();
    const waiting = fetch(`${api.api.url}/api/v1/executions/${e.id}/wait?timeout=30`, { headers: { 'X-Request-Id': 'parked.200' } });
    await waitUntil(async () => (await longPollsWaiting(api)) === 1, 'the long-poll to park');
    await new Promise((r) => setTimeout(r, 200));
    await completeAs(api.db, e.lease!, { total: 3 });
    const res = await waiting;
    const rec = await recordResponse('GET', `/api/v1/executions/${e.id}/wait`, res.clone());
    expect(rec).toMatchSpec();
    expect(rec.status).toBe(200);
    expect(rec.body).toMatchObject({ execution_id: e.id, status: 'completed', output: { total: 3 } });
    expect(res.headers.get('x-request-id')).toBe('parked.200');
    expect(res.headers.get('content-length')).toBe(String(Buffer.byteLength(rec.text)));
    // The same headers as the same answer given by Koa (timeout=0 never waits).
    const direct = await fetch(`${api.api.url}/api/v1/executions/${e.id}/wait?timeout=0`);
    expect(await direct.text()).toBe(rec.text);
    expect(comparableHeaders(res.headers)).toEqual(comparableHeaders(direct.headers));
    expect(comparableHeaders(res.headers)).toMatchObject({ 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', 'content-type': 'application/json; charset=utf-8' });

    const line = await waitUntil(() => accessLogLine(api, 'parked.200'), 'the access log line');
    expect(line).toMatchObject({ method: 'GET', route: ROUTE, status: 200 });
    expect(line.durationMs).toBeGreaterThanOrEqual(150);
    expect(line.durationMs).toBeLessThanOrEqual(Date.now() - started + 50);
    const metrics = await api.call('GET', '/metrics');
    expect(metrics.text).toMatch(/stepwise_http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/executions\/:id\/wait",status="200"\} [1-9]/);
  });

  test('answers 202 when the timeout passes, logged with its status and request id', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const res = await fetch(`${api.api.url}/api/v1/executions/${e.id}/wait?timeout=1`, { headers: { 'X-Request-Id': 'parked.202' } });
    const rec = await recordResponse('GET', `/api/v1/executions/${e.id}/wait`, res.clone());
    expect(rec).toMatchSpec();
    expect(rec.status).toBe(202);
    expect(rec.body).toMatchObject({ execution_id: e.id, status: 'pending' });
    expect(res.headers.get('x-request-id')).toBe('parked.202');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const line = await waitUntil(() => accessLogLine(api, 'parked.202'), 'the access log line');
    expect(line).toMatchObject({ method: 'GET', route: ROUTE, status: 202 });
    expect(line.durationMs).toBeGreaterThanOrEqual(900);
  });

  test('an execution gone when the timeout passes is answered with the 404 envelope', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const waiting = fetch(`${api.api.url}/api/v1/executions/${e.id}/wait?timeout=1`, { headers: { 'X-Request-Id': 'parked.404' } });
    await waitUntil(async () => (await longPollsWaiting(api)) === 1, 'the long-poll to park');
    await api.db.raw('DELETE FROM stepwise.executions WHERE id = ?', [e.id]);
    const res = await waiting;
    const rec = await recordResponse('GET', `/api/v1/executions/${e.id}/wait`, res.clone());
    expect(rec).toMatchSpec();
    expect(rec.status).toBe(404);
    expect(rec.body).toMatchObject({ error: { code: 'execution_not_found' } });
    expect(res.headers.get('x-request-id')).toBe('parked.404');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(accessLogLine(api, 'parked.404')).toMatchObject({ route: ROUTE, status: 404 });
  });

  test('a client that hangs up frees its waiter at once and is still logged', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const abort = new AbortController();
    const hanging = fetch(`${api.api.url}/api/v1/executions/${e.id}/wait?timeout=60`, { signal: abort.signal, headers: { 'X-Request-Id': 'parked.gone' } }).catch(() => undefined);
    await waitUntil(async () => (await longPollsWaiting(api)) === 1, 'the long-poll to park');
    abort.abort();
    await hanging;
    await waitUntil(async () => (await longPollsWaiting(api)) === 0, 'the waiter to be released');
    expect(await waitUntil(() => accessLogLine(api, 'parked.gone'), 'the access log line')).toMatchObject({ route: ROUTE, status: 202 });
  });

  test('holds no Koa context while it waits', async () => {
    const contexts: Array<WeakRef<object>> = [];
    // Patched by hand: a jest spy would keep every context it returned in its `mock.results`.
    const createContext = Koa.prototype.createContext;
    Koa.prototype.createContext = function (this: Koa, req, res) {
      const ctx = createContext.call(this, req, res);
      if (req.url?.includes('/wait')) contexts.push(new WeakRef(ctx));
      return ctx;
    } as typeof createContext;
    try {
      const e = await createExecutionIn(api.client, api.db, 'running');
      const waiting = fetch(`${api.api.url}/api/v1/executions/${e.id}/wait?timeout=30`);
      await waitUntil(async () => (await longPollsWaiting(api)) === 1, 'the long-poll to park');
      expect(contexts).toHaveLength(1);
      await new Promise((r) => setTimeout(r, 50));
      gc();
      gc();
      expect(contexts[0].deref()).toBeUndefined();
      await completeAs(api.db, e.lease!, null);
      expect((await waiting).status).toBe(200);
    } finally {
      Koa.prototype.createContext = createContext;
    }
  });
});

describe('closing the server', () => {
  test('answers a waiting long-poll 202, with its request id, and logs it', async () => {
    const api = await startTestApi({ logLevel: 'debug' });
    try {
      const e = await createExecutionIn(api.client, api.db, 'pending');
      const answer = fetch(`${api.api.url}/api/v1/executions/${e.id}/wait?timeout=60`, { headers: { 'X-Request-Id': 'parked.closing' } });
      await waitUntil(async () => (await longPollsWaiting(api)) === 1, 'the long-poll to park');
      await api.api.close();
      const res = await answer;
      const rec = await recordResponse('GET', `/api/v1/executions/${e.id}/wait`, res.clone());
      expect(rec).toMatchSpec();
      expect(rec.status).toBe(202);
      expect(res.headers.get('x-request-id')).toBe('parked.closing');
      expect(accessLogLine(api, 'parked.closing')).toMatchObject({ route: ROUTE, status: 202 });
    } finally {
      await api.close();
    }
  });
});
