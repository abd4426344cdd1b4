// What a client sends is what is stored and what a handler sees: bodies that would be stored as
// something else, or that do not decode, are the client's error (4xx), never a 201 or a 5xx.
import { gzipSync } from 'node:zlib';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { createExecutionIn, registerTask, uniqueTask } from '../helpers/simulated-worker';
import { queryRows } from '../../src/store/db';

const JSON_HEADERS = { 'Content-Type': 'application/json' };
let api: TestApi;

beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

describe('body checks in the contract order', () => {
  test('a body of the wrong shape for an unknown task is invalid_data, not task_not_registered', async () => {
    const res = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: '{"task":"no-such-task","data":"x"}' });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body/data' }] } });
  });

  test('a well-shaped body for an unknown task is task_not_registered; then data is checked against the schema', async () => {
    const unknown = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: '{"task":"no-such-task","data":{}}' });
    expect(unknown.body).toMatchObject({ error: { code: 'task_not_registered' } });
    const task = uniqueTask('ordered');
    await registerTask(api.db, task, { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] });
    const bad = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: JSON.stringify({ task, data: { n: 'x' } }) });
    expect(bad.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body/data/n', message: 'must be integer' }] } });
  });
});

describe('numbers that would be stored as null', () => {
  test('schedule data with 1e400 is 422 invalid_data naming the field; nothing is created', async () => {
    const task = uniqueTask('overflow');
    await registerTask(api.db, task, { type: 'object', properties: { orderId: { type: 'string' }, amountCents: { type: 'integer' } } });
    for (const literal of ['1e400', '-1e400', '1E+999', '9'.repeat(400)]) {
      const res = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: `{"task":"${task}","data":{"orderId":"p","amountCents":${literal}}}` });
      expect({ literal, status: res.status }).toEqual({ literal, status: 422 });
      expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body/data/amountCents' }] } });
    }
    const [{ n }] = await queryRows<{ n: number }>(api.db, 'SELECT count(*) AS n FROM stepwise.executions WHERE task = ?', [task]);
    expect(n).toBe(0);
    // Large but finite numbers are fine, and stored as sent.
    const ok = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: `{"task":"${task}","data":{"orderId":"p","amountCents":1e300}}` });
    expect(ok.status).toBe(201);
    expect((await api.client.get((ok.body as { execution_id: string }).execution_id)).data).toEqual({ orderId: 'p', amountCents: 1e300 });
  });

  test('an event payload with an overflowing number is 422 and the execution keeps waiting', async () => {
    const e = await createExecutionIn(api.client, api.db, 'waiting');
    for (const body of ['1e400', '{"amount":[1,2,-1e999]}']) {
      const res = await api.call('POST', `/api/v1/events/${e.id}/approval`, { headers: JSON_HEADERS, body });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: { code: 'invalid_data' } });
    }
    expect(await api.client.get(e.id)).toMatchObject({ status: 'waiting', waiting_for_event: { event_name: 'approval' } });
  });
});

describe('UTF-8', () => {
  test('a body with bytes that are not UTF-8 is 400 invalid_json and schedules nothing; a U+FFFD the client wrote is kept', async () => {
    const task = uniqueTask('utf8');
    await registerTask(api.db, task);
    const count = async () => (await queryRows<{ n: number }>(api.db, 'SELECT count(*)::int AS n FROM stepwise.executions WHERE task = ?', [task]))[0].n;
    const prefix = Buffer.from(`{"task":"${task}","data":{"name":"`);
    const suffix = Buffer.from('"}}');
    // A lone 0xFF, a cut 4-byte sequence (its replacement is as long as it), an overlong '/', a lone surrogate's bytes.
    for (const bad of [[0xff], [0xf0, 0x9f, 0x98], [0xc0, 0xaf], [0xed, 0xa0, 0x80]]) {
      const res = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: new Blob([Buffer.concat([prefix, Buffer.from(bad), suffix])]) });
      expect({ bad, status: res.status, body: res.body }).toEqual({ bad, status: 400, body: { error: expect.objectContaining({ code: 'invalid_json', message: 'request body is not valid UTF-8' }) } });
    }
    expect(await count()).toBe(0);
    const ok = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: new Blob([Buffer.concat([prefix, Buffer.from('\uFFFD', 'utf8'), suffix])]) });
    expect(ok.status).toBe(201);
    expect((await api.client.get((ok.body as { execution_id: string }).execution_id)).data).toEqual({ name: '\uFFFD' });
  });
});

describe('content encodings', () => {
  test('a gzip, deflate or brotli body that does not decode is 400 invalid_json, never a 500', async () => {
    const task = uniqueTask('gzip');
    await registerTask(api.db, task);
    for (const bytes of [Buffer.from('definitely not gzip'), gzipSync('{"task":"x","data":{}}').subarray(0, 12)]) {
      const res = await api.call('POST', '/api/v1/executions', { headers: { ...JSON_HEADERS, 'Content-Encoding': 'gzip' }, body: new Blob([bytes]) });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: { code: 'invalid_json' } });
    }
    for (const encoding of ['deflate', 'br']) {
      const res = await api.call('POST', '/api/v1/executions', { headers: { ...JSON_HEADERS, 'Content-Encoding': encoding }, body: new Blob([Buffer.from([0, 0, 1, 2])]) });
      expect({ encoding, status: res.status }).toEqual({ encoding, status: 400 });
    }
    const ok = await api.call('POST', '/api/v1/executions', { headers: { ...JSON_HEADERS, 'Content-Encoding': 'gzip' }, body: new Blob([gzipSync(JSON.stringify({ task, data: {} }))]) });
    expect(ok.status).toBe(201);
  });
});
