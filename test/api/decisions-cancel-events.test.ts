// PRODUCT.md §1, decisions about cancel, ids and events: one named test per row.
import pg from 'pg';
import '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { completeAs, createExecutionIn } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { newExecutionId } from '../../src/domain/ids';
import { CHANNEL_CANCEL } from '../../src/store/channels';

let api: TestApi;
const JSON_HEADERS = { 'Content-Type': 'application/json' };
const approvalSchema = { type: 'object', properties: { approved: { type: 'boolean' } }, required: ['approved'] };

beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

describe('cancel decisions', () => {
  test.each(['pending', 'running', 'waiting'] as const)('cancel of a %s execution returns 200 {execution_id, status: "cancelled"}', async (state) => {
    const e = await createExecutionIn(api.client, api.db, state);
    const res = await api.call('POST', `/api/v1/executions/${e.id}/cancel`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ execution_id: e.id, status: 'cancelled' });
    expect((await api.client.get(e.id)).status).toBe('cancelled');
  });

  test('cancel of a running execution signals its worker and discards the late result', async () => {
    const listener = new pg.Client({ connectionString: api.t.url });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => heard.push(n.payload ?? ''));
    await listener.query(`LISTEN ${CHANNEL_CANCEL}`);
    try {
      const e = await createExecutionIn(api.client, api.db, 'running');
      await api.client.cancel(e.id);
      await waitUntil(() => heard.includes(e.id), 'the cancel notification');
      expect(await completeAs(api.db, e.lease!, { late: true })).toBe(false);
      expect(await api.client.get(e.id)).toMatchObject({ status: 'cancelled', output: null });
    } finally {
      await listener.end();
    }
  });

  test('cancel of an already cancelled execution returns 200 again (idempotent)', async () => {
    const e = await createExecutionIn(api.client, api.db, 'cancelled');
    expect(await api.client.cancel(e.id)).toEqual({ execution_id: e.id, status: 'cancelled' });
    expect(await api.client.cancel(e.id)).toEqual({ execution_id: e.id, status: 'cancelled' });
  });

  test.each(['completed', 'failed'] as const)('cancel of a %s execution is 409 execution_not_cancellable', async (state) => {
    const e = await createExecutionIn(api.client, api.db, state);
    await expect(api.client.cancel(e.id)).rejects.toMatchObject({ status: 409, code: 'execution_not_cancellable' });
    expect((await api.client.get(e.id)).status).toBe(state);
  });

  test('cancel accepts no body or an empty object, and rejects any option with 422', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    expect((await api.call('POST', `/api/v1/executions/${e.id}/cancel`, { headers: JSON_HEADERS, body: '{}' })).status).toBe(200);
    const extra = await api.call('POST', `/api/v1/executions/${e.id}/cancel`, { headers: JSON_HEADERS, body: '{"force":true}' });
    expect(extra.status).toBe(422);
  });
});

describe('id decisions', () => {
  const junkIds: Array<[string, string]> = [
    ['a valid id of no execution', newExecutionId()],
    ['a word', 'abc'],
    ['the nil UUID', '00000000-0000-0000-0000-000000000000'],
    ['SQL', "1' OR '1'='1"],
    ['unicode', 'ünïcödé-☃'],
    ['500 digits', '9'.repeat(500)],
    ['a UUID one digit short', '0192D4C8-7A51-7CC2-9A1E-2F7F3C3B9D1'],
  ];
  test.each(junkIds)('any id that does not exist or is not a valid id is 404 execution_not_found on every operation: %s', async (_what, id) => {
    const p = `/api/v1/executions/${encodeURIComponent(id)}`;
    const answers = await Promise.all([
      api.call('GET', p),
      api.call('GET', `${p}/wait?timeout=0`),
      api.call('POST', `${p}/cancel`),
      api.call('POST', `/api/v1/events/${encodeURIComponent(id)}/approval`, { headers: JSON_HEADERS, body: '{}' }),
      api.call('GET', `${p}/steps`),
    ]);
    for (const a of answers) {
      expect(a.status).toBe(404);
      expect(a.body).toMatchObject({ error: { code: 'execution_not_found' } });
    }
  });
});

describe('event decisions', () => {
  test.each([
    ['an object', { approved: true }],
    ['an array', [1, 'two', null]],
    ['a string', 'yes'],
    ['a number', 42.5],
    ['true', true],
    ['false', false],
    ['null', null],
  ])('an event body may be any JSON value: %s', async (_what, payload) => {
    const e = await createExecutionIn(api.client, api.db, 'waiting');
    const res = await api.call('POST', `/api/v1/events/${e.id}/approval`, { headers: JSON_HEADERS, body: JSON.stringify(payload) });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ execution_id: e.id, event_name: 'approval' });
    const [step] = await api.client.listSteps(e.id);
    expect(step).toMatchObject({ kind: 'event', status: 'completed', result: { payload } });
  });

  test('an empty event body is delivered as null', async () => {
    const e = await createExecutionIn(api.client, api.db, 'waiting');
    for (const headers of [{}, JSON_HEADERS]) {
      const target = headers === JSON_HEADERS ? await createExecutionIn(api.client, api.db, 'waiting') : e;
      const res = await api.call('POST', `/api/v1/events/${target.id}/approval`, { headers });
      expect(res.status).toBe(200);
      const [step] = await api.client.listSteps(target.id);
      expect(step.result).toEqual({ payload: null });
    }
  });

  test('an event payload that fails the schema the task declared is 422 invalid_data and the execution keeps waiting', async () => {
    const e = await createExecutionIn(api.client, api.db, 'waiting', { eventSchemas: { approval: approvalSchema } });
    const res = await api.call('POST', `/api/v1/events/${e.id}/approval`, { headers: JSON_HEADERS, body: '{"approved":"yes"}' });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body/approved', message: 'must be boolean' }] } });
    expect(await api.client.get(e.id)).toMatchObject({ status: 'waiting', waiting_for_event: { event_name: 'approval' } });
    expect(await api.client.sendEvent(e.id, 'approval', { approved: true })).toMatchObject({ event_name: 'approval' });
  });

  test('two deliveries of the same event at once: exactly one 200, the other 409 not_waiting_for_event', async () => {
    for (let round = 0; round < 5; round++) {
      const e = await createExecutionIn(api.client, api.db, 'waiting');
      const answers = await Promise.all([1, 2].map((n) => api.call('POST', `/api/v1/events/${e.id}/approval`, { headers: JSON_HEADERS, body: JSON.stringify({ n }) })));
      expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
      expect(answers.find((a) => a.status === 409)?.body).toMatchObject({ error: { code: 'not_waiting_for_event' } });
    }
  });

  test('an event for an execution that waits for another event, or does not wait, is 409 not_waiting_for_event', async () => {
    const other = await createExecutionIn(api.client, api.db, 'waiting', { eventName: 'shipment' });
    await expect(api.client.sendEvent(other.id, 'approval', { approved: true })).rejects.toMatchObject({ status: 409, code: 'not_waiting_for_event' });
    expect((await api.client.get(other.id)).waiting_for_event?.event_name).toBe('shipment');
    for (const state of ['pending', 'running', 'completed', 'cancelled'] as const) {
      const e = await createExecutionIn(api.client, api.db, state);
      await expect(api.client.sendEvent(e.id, 'approval', null)).rejects.toMatchObject({ status: 409, code: 'not_waiting_for_event' });
    }
  });
});
