// Cross-cutting HTTP behaviour: request ids, base path, body edge cases.
import { gzipSync } from 'node:zlib';
import { parse as parseYaml } from 'yaml';
import '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { createExecutionIn, registerTask, uniqueTask } from '../helpers/simulated-worker';
import { getSpec } from '../../src/api/spec';
import { newExecutionId } from '../../src/domain/ids';

const JSON_HEADERS = { 'Content-Type': 'application/json' };

describe('request ids', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi({ tokens: ['request-id-token'] });
  });
  afterAll(async () => {
    await api.close();
  });
  const auth = { Authorization: 'Bearer request-id-token' };

  test('every response, errors included, echoes a sane client X-Request-Id', async () => {
    const requests: Array<[string, string, Record<string, string>, string?]> = [
      ['GET', '/healthz', {}],
      ['GET', '/api/v1/tasks', auth],
      ['GET', '/api/v1/tasks', {}], // 401
      ['GET', `/api/v1/executions/${newExecutionId()}`, auth], // 404
      ['DELETE', '/api/v1/tasks', auth], // 405
      ['GET', '/nowhere', {}], // 404 route
      ['POST', '/api/v1/executions', { ...auth, 'Content-Type': 'text/plain' }, 'x'], // 415
      ['POST', '/api/v1/executions', { ...auth, ...JSON_HEADERS }, '{'], // 400
      ['GET', '/api/v1/executions?limit=0', auth], // 422
    ];
    for (const [i, [method, path, headers, body]] of requests.entries()) {
      const id = `client-id.${i}:ok_-`;
      const res = await api.call(method, path, { headers: { ...headers, 'X-Request-Id': id }, body });
      expect(res.headers.get('x-request-id')).toBe(id);
    }
  });

  test('a missing or unsafe X-Request-Id is replaced by a new UUID', async () => {
    for (const sent of [undefined, '', 'has space', 'x'.repeat(129), 'new\u00e9line', '<script>']) {
      const res = await api.call('GET', '/healthz', { headers: sent === undefined ? {} : { 'X-Request-Id': sent } });
      expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
  });
});

describe('base path', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi({ basePath: '/sw/v' });
  });
  afterAll(async () => {
    await api.close();
  });

  test('every route lives under the configured base path, and nothing outside it', async () => {
    expect(api.api.url).toMatch(/\/sw\/v$/);
    expect((await api.call('GET', '/healthz')).status).toBe(200);
    expect((await api.call('GET', '/readyz')).status).toBe(200);
    expect((await api.call('GET', '/metrics')).status).toBe(200);
    expect((await api.call('GET', '/api/v1/tasks')).status).toBe(200);
    const task = uniqueTask();
    await registerTask(api.db, task);
    const e = await api.client.schedule(task, { via: 'base path' });
    expect((await api.client.get(e.execution_id)).data).toEqual({ via: 'base path' });
    for (const path of ['/healthz', '/api/v1/tasks', '/sw/healthz']) {
      const outside = await fetch(`${new URL(api.api.url).origin}${path}`);
      expect(outside.status).toBe(404);
      expect(outside.headers.get('x-request-id')).toBeTruthy();
      const body: unknown = await outside.json();
      expect(getSpec().validateErrorEnvelope(body)).toBe(true);
      expect(body).toMatchObject({ error: { code: 'route_not_found' } });
    }
  });

  test('the contract is served at {basePath}/api/v1/openapi.yaml without a token', async () => {
    const res = await api.call('GET', '/api/v1/openapi.yaml');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/yaml/);
    expect((parseYaml(res.text) as { openapi: string }).openapi).toBe('3.1.0');
  });
});

describe('request bodies', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi({ http: { jsonMaxDepth: 8, bodyLimitBytes: 300000 } });
  });
  afterAll(async () => {
    await api.close();
  });

  test('JSON nested deeper than jsonMaxDepth is 422 invalid_data; at the limit it is accepted', async () => {
    const e = await createExecutionIn(api.client, api.db, 'waiting');
    const nest = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const deep = await api.call('POST', `/api/v1/events/${e.id}/approval`, { headers: JSON_HEADERS, body: nest(9) });
    expect(deep.status).toBe(422);
    expect(deep.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body' }] } });
    // Brackets inside strings are not nesting.
    const inString = await api.call('POST', `/api/v1/events/${e.id}/approval`, { headers: JSON_HEADERS, body: JSON.stringify([nest(50)]) });
    expect(inString.status).toBe(200);
    const ok = await createExecutionIn(api.client, api.db, 'waiting');
    expect((await api.call('POST', `/api/v1/events/${ok.id}/approval`, { headers: JSON_HEADERS, body: nest(8) })).status).toBe(200);
  });

  test('a very deep body (100,000 levels) is refused without harm', async () => {
    const res = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: '['.repeat(1000) + ']'.repeat(1000) });
    expect(res.status).toBe(422);
    const big = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: '['.repeat(100000) + ']'.repeat(100000) });
    expect(big.status).toBe(422);
    expect((await api.call('GET', '/healthz')).status).toBe(200);
  });

  test('the body limit is configurable', async () => {
    const res = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: JSON.stringify({ task: 'x', data: 'y'.repeat(300000) }) });
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ error: { message: 'request body exceeds the limit of 300000 bytes' } });
  });

  test('a "__proto__" key is refused with 422 rather than silently dropped', async () => {
    const res = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: '{"task":"x","__proto__":{"polluted":true}}' });
    expect(res.status).toBe(422);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  test('an escaped "__proto__" key is refused too', async () => {
    const res = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: '{"task":"x","data":{"\\u005f_proto__":{"polluted":true}}}' });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body' }] } });
  });

  test('a leading UTF-8 BOM is dropped, a gzip body is inflated, an unknown encoding is 415', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const body = JSON.stringify({ task, data: { n: 1 } });
    expect((await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: `\ufeff${body}` })).status).toBe(201);
    const gzipped = new Blob([gzipSync(body)]);
    expect((await api.call('POST', '/api/v1/executions', { headers: { ...JSON_HEADERS, 'Content-Encoding': 'gzip' }, body: gzipped })).status).toBe(201);
    expect((await api.call('POST', '/api/v1/executions', { headers: { ...JSON_HEADERS, 'Content-Encoding': 'klingon' }, body })).status).toBe(415);
  });

  test('text PostgreSQL cannot store (NUL, unpaired surrogates) is 422 invalid_data, never a 500', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const e = await createExecutionIn(api.client, api.db, 'waiting');
    const bodies: Array<[string, string, string]> = [
      ['/api/v1/executions', `{"task":"${task}","data":{"a":"x\\u0000y"}}`, 'body/data/a'],
      ['/api/v1/executions', `{"task":"${task}","data":{},"idempotency_key":"k\\u0000"}`, 'body/idempotency_key'],
      ['/api/v1/executions', `{"task":"${task}","data":{"a":["\\ud800"]}}`, 'body/data/a/0'],
      [`/api/v1/events/${e.id}/approval`, '{"\\u0000":1}', 'body/\u0000'],
      [`/api/v1/events/${e.id}/approval`, '"\\udc00"', 'body'],
    ];
    for (const [path, body, at] of bodies) {
      const res = await api.call('POST', path, { headers: JSON_HEADERS, body });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: at }] } });
    }
    const query = await api.call('GET', '/api/v1/executions?task=a%00b');
    expect(query.status).toBe(422);
    expect(query.body).toMatchObject({ error: { details: [{ path: 'query/task' }] } });
    // A surrogate pair (an emoji) is fine.
    expect((await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: `{"task":"${task}","data":{"e":"\\ud83d\\ude00"}}` })).status).toBe(201);
  });

  test('an unsupported charset is 415 and a JSON charset is accepted', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const body = JSON.stringify({ task, data: {} });
    expect((await api.call('POST', '/api/v1/executions', { headers: { 'Content-Type': 'application/json; charset=klingon' }, body })).status).toBe(415);
    expect((await api.call('POST', '/api/v1/executions', { headers: { 'Content-Type': 'application/json; charset=utf-8' }, body })).status).toBe(201);
  });

  test('an empty POST body on schedule is 422 (the body is required); on cancel it is fine', async () => {
    const res = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body', message: 'is required' }] } });
    const e = await createExecutionIn(api.client, api.db, 'pending');
    expect((await api.call('POST', `/api/v1/executions/${e.id}/cancel`, { headers: JSON_HEADERS })).status).toBe(200);
  });

  test('an event name longer than 255 characters is 422 invalid_data', async () => {
    const e = await createExecutionIn(api.client, api.db, 'waiting');
    const res = await api.call('POST', `/api/v1/events/${e.id}/${'e'.repeat(256)}`);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { details: [{ path: 'path/event_name' }] } });
  });
});
