// PRODUCT.md §1, decisions about scheduling and request bodies: one named test per row.
import { recordResponse } from '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { queryRows } from '../../src/store/db';

let api: TestApi;
const JSON_HEADERS = { 'Content-Type': 'application/json' };
const orderSchema = { type: 'object', properties: { orderId: { type: 'string' } }, required: ['orderId'], additionalProperties: false };

beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

async function countByKey(key: string): Promise<number> {
  const [{ n }] = await queryRows<{ n: number }>(api.db, 'SELECT count(*)::int AS n FROM stepwise.executions WHERE idempotency_key = ?', [key]);
  return n;
}

describe('POST /executions decisions', () => {
  test('same idempotency_key with the same task returns 200 with the existing execution and creates nothing, even concurrently', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const first = await api.client.schedule(task, { n: 1 }, { idempotencyKey: `k-${task}` });
    expect(first.created).toBe(true);
    const again = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: JSON.stringify({ task, data: { n: 2 }, idempotency_key: `k-${task}` }) });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ execution_id: first.execution_id, task, status: 'pending', created_at: first.created_at });
    const concurrent = await Promise.all(Array.from({ length: 10 }, () => api.client.schedule(task, {}, { idempotencyKey: `k-${task}` })));
    expect(new Set(concurrent.map((c) => c.execution_id))).toEqual(new Set([first.execution_id]));
    expect(concurrent.every((c) => !c.created)).toBe(true);
    expect(await countByKey(`k-${task}`)).toBe(1);
  });

  test('same idempotency_key with another task returns 409 execution_already_exists', async () => {
    const [a, b] = [uniqueTask('a'), uniqueTask('b')];
    await registerTask(api.db, a);
    await registerTask(api.db, b);
    await api.client.schedule(a, {}, { idempotencyKey: `shared-${a}` });
    await expect(api.client.schedule(b, {}, { idempotencyKey: `shared-${a}` })).rejects.toMatchObject({ status: 409, code: 'execution_already_exists' });
    expect(await countByKey(`shared-${a}`)).toBe(1);
  });

  test('checks run in order: body shape (invalid_data) before task known (task_not_registered) before data against the schema', async () => {
    const known = uniqueTask('known');
    await registerTask(api.db, known, orderSchema);
    // A bad shape wins over an unknown task.
    const shape = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: JSON.stringify({ task: 'never-registered', data: 1, extra: true }) });
    expect(shape.status).toBe(422);
    expect(shape.body).toMatchObject({ error: { code: 'invalid_data' } });
    // An unknown task wins over data that no schema could accept.
    await expect(api.client.schedule('never-registered', { orderId: 42 })).rejects.toMatchObject({ status: 422, code: 'task_not_registered' });
    // A known task with bad data: invalid_data with details pointing into data.
    const data = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: JSON.stringify({ task: known, data: { orderId: 42 } }) });
    expect(data.status).toBe(422);
    expect(data.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body/data/orderId', message: 'must be string' }] } });
    expect((await api.client.schedule(known, { orderId: 'o-1' })).status).toBe('pending');
  });

  test('an unknown top-level body field such as idempotencyKey is 422 invalid_data and never silently drops idempotency', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const res = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: JSON.stringify({ task, data: {}, idempotencyKey: `typo-${task}` }) });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body/idempotencyKey' }] } });
    expect((await api.client.list({ task })).total).toBe(0);
  });

  test('idempotency_key must be 1 to 255 characters', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    for (const key of ['', 'k'.repeat(256)]) {
      await expect(api.client.schedule(task, {}, { idempotencyKey: key })).rejects.toMatchObject({ status: 422, code: 'invalid_data' });
    }
    expect((await api.client.schedule(task, {}, { idempotencyKey: 'k'.repeat(255) })).created).toBe(true);
    expect((await api.client.schedule(task, {}, { idempotencyKey: 'x' })).created).toBe(true);
  });

  test('malformed JSON is 400 invalid_json', async () => {
    for (const body of ['{"task": ', '{task: "x"}', "{'task':'x'}", '[1,]', 'nul']) {
      const res = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: { code: 'invalid_json' } });
    }
  });

  test('a body with a content type other than application/json is 415 unsupported_media_type', async () => {
    const body = JSON.stringify({ task: 'x' });
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml', 'multipart/form-data; boundary=x']) {
      const res = await api.call('POST', '/api/v1/executions', { headers: { 'Content-Type': type }, body });
      expect(res.status).toBe(415);
      expect(res.body).toMatchObject({ error: { code: 'unsupported_media_type' } });
    }
    // No content type at all is not JSON either.
    const bare = await recordResponse('POST', '/api/v1/executions', await fetch(`${api.api.url}/api/v1/executions`, { method: 'POST', body: new Blob([body]) }));
    expect(bare).toMatchSpec();
    expect(bare.status).toBe(415);
    // JSON with parameters or a +json suffix is JSON.
    const task = uniqueTask();
    await registerTask(api.db, task);
    for (const type of ['application/json; charset=utf-8', 'application/vnd.stepwise+json']) {
      expect((await api.call('POST', '/api/v1/executions', { headers: { 'Content-Type': type }, body: JSON.stringify({ task, data: {} }) })).status).toBe(201);
    }
  });

  test('a body over the limit (default 1 MiB) is 413 payload_too_large', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const big = JSON.stringify({ task, data: { s: 'x'.repeat(1024 * 1024) } });
    const res = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: big });
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ error: { code: 'payload_too_large' } });
    const fits = JSON.stringify({ task, data: { s: 'x'.repeat(1024 * 1024 - 200) } });
    expect((await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: fits })).status).toBe(201);
  });
});

describe('POST /executions under concurrency', () => {
  test('concurrent schedules share commits yet each gets its own execution and data', async () => {
    const task = uniqueTask('batch');
    await registerTask(api.db, task);
    const results = await Promise.all(Array.from({ length: 64 }, (_, i) => api.client.schedule(task, { i })));
    expect(new Set(results.map((r) => r.execution_id)).size).toBe(64);
    const rows = await queryRows<{ id: string; data: { i: number } }>(api.db, 'SELECT id, data FROM stepwise.executions WHERE task = ?', [task]);
    const byId = new Map(rows.map((r) => [r.id, r.data.i]));
    results.forEach((r, i) => expect(byId.get(r.execution_id)).toBe(i));
  });

  test('data holding a NUL character is 422 invalid_data, and the other schedules in its batch still succeed', async () => {
    const task = uniqueTask('nul');
    await registerTask(api.db, task);
    const [bad, ...good] = await Promise.all([
      api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: JSON.stringify({ task, data: { s: 'a\u0000b' } }) }),
      ...Array.from({ length: 5 }, (_, i) => api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: JSON.stringify({ task, data: { i } }) })),
    ]);
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({ error: { code: 'invalid_data' } });
    expect(good.map((g) => g.status)).toEqual([201, 201, 201, 201, 201]);
  });
});
