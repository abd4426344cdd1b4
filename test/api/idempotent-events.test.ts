// Event deliveries a client may retry (PRODUCT.md §7): the Idempotency-Key header on
// POST /api/v1/events/{id}/{event_name}.
import { defineTask } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { queryRows } from '../../src/store/db';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { startWorker } from '../helpers/worker';
import { waitUntil } from '../helpers/wait-until';

let api: TestApi;
let worker: Worker;
const JSON_HEADERS = { 'Content-Type': 'application/json' };

/** Waits for `go` twice and returns both payloads: a second delivery has a wait to land in. */
const twice = defineTask({
  name: 'idem-twice',
  async run(ctx) {
    const first = await ctx.waitForEvent('go');
    const second = await ctx.waitForEvent('go');
    return { first, second };
  },
});

beforeAll(async () => {
  api = await startTestApi();
  worker = await startWorker(api.t, [twice] as never, { pollIntervalMs: 100 });
});
afterAll(async () => {
  await worker.stop();
  await api.close();
});

async function waitingExecution(): Promise<string> {
  const { execution_id } = await api.client.schedule(twice.name, {});
  await waitUntil(async () => ((await api.client.get(execution_id)).waiting_for_events.length === 1 ? true : undefined), 'the execution to wait for go', 10_000, 20);
  return execution_id;
}

const send = (id: string, payload: unknown, key?: string) =>
  api.call('POST', `/api/v1/events/${id}/go`, { headers: { ...JSON_HEADERS, ...(key === undefined ? {} : { 'Idempotency-Key': key }) }, body: JSON.stringify(payload) });

const keptRows = async (id: string) => (await queryRows<{ n: number }>(api.db, 'SELECT count(*)::int AS n FROM stepwise.event_deliveries WHERE execution_id = ?', [id]))[0].n;

describe('Idempotency-Key on event delivery', () => {
  test('a repeat answers the first 200 again, unchanged, after the execution moved on, and delivers nothing more', async () => {
    const id = await waitingExecution();
    const first = await send(id, { n: 1 }, 'key-1');
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ status: 'delivered', execution_id: id, event_name: 'go', execution_status: 'waiting' });
    // The execution now waits for its second `go`: the repeat must not land there.
    await waitUntil(async () => ((await api.client.get(id)).steps_completed === 1 && (await api.client.get(id)).waiting_for_events.length === 1 ? true : undefined), 'the second wait', 10_000, 20);
    const repeat = await send(id, { n: 'ignored' }, 'key-1');
    expect(repeat.status).toBe(200);
    expect(repeat.text).toBe(first.text);
    expect((await api.client.get(id)).steps_completed).toBe(1);
    // Another key is another delivery; once the execution has ended, the first key still answers.
    expect((await send(id, { n: 2 }, 'key-2')).status).toBe(200);
    expect(await api.client.wait(id, { deadlineMs: 10_000 })).toMatchObject({ status: 'completed', output: { first: { n: 1 }, second: { n: 2 } } });
    const late = await send(id, { n: 3 }, 'key-1');
    expect(late.status).toBe(200);
    expect(late.text).toBe(first.text);
  });

  test('a new key, or none, for an execution that no longer waits is 409 not_waiting_for_event', async () => {
    const id = await waitingExecution();
    await send(id, 1, 'a');
    await waitUntil(async () => ((await api.client.get(id)).steps_completed === 1 && (await api.client.get(id)).waiting_for_events.length === 1 ? true : undefined), 'the second wait', 10_000, 20);
    await send(id, 2, 'b');
    await api.client.wait(id, { deadlineMs: 10_000 });
    for (const key of ['c', undefined]) {
      const res = await send(id, 3, key);
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ error: { code: 'not_waiting_for_event' } });
    }
  });

  test('ten concurrent deliveries with one key: all answer the same 200, and one event is delivered', async () => {
    const id = await waitingExecution();
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => send(id, { i }, 'same')));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    for (const a of answers) expect(a.body).toEqual(answers[0].body);
    await waitUntil(async () => ((await api.client.get(id)).waiting_for_events.length === 1 && (await api.client.get(id)).steps_completed === 1 ? true : undefined), 'the second wait', 10_000, 20);
    const steps = await api.client.listSteps(id);
    expect(steps.filter((s) => s.kind === 'event' && s.status === 'completed')).toHaveLength(1);
    expect(await keptRows(id)).toBe(1);
    await api.client.cancel(id);
  });

  test('a keyed delivery that found nothing to deliver keeps no key: the same key delivers once the execution waits', async () => {
    const { execution_id: id } = await api.client.schedule(twice.name, {}, { startAt: new Date(Date.now() + 1500) });
    const early = await send(id, { n: 1 }, 'early');
    expect(early.status).toBe(409);
    expect(await keptRows(id)).toBe(0);
    await waitUntil(async () => ((await api.client.get(id)).waiting_for_events.length === 1 ? true : undefined), 'the execution to wait for go', 10_000, 20);
    const later = await send(id, { n: 1 }, 'early');
    expect(later.status).toBe(200);
    expect(await keptRows(id)).toBe(1);
    await api.client.cancel(id);
  });

  test('a repeat is answered even when the payload no longer fits; a bad key is 422 naming the header', async () => {
    const id = await waitingExecution();
    expect((await send(id, 1, 'k')).status).toBe(200);
    const tooLong = await send(id, 1, 'x'.repeat(256));
    expect(tooLong.status).toBe(422);
    expect(tooLong.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'header/idempotency-key' }] } });
    await api.client.cancel(id);
    const unknown = await send('0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10', 1, 'k');
    expect(unknown.status).toBe(404);
  });

  test('the typed client sends the key: a retried delivery is not refused', async () => {
    const id = await waitingExecution();
    const first = await api.client.sendEvent(id, 'go', { n: 1 }, { idempotencyKey: 'client-1' });
    const again = await api.client.sendEvent(id, 'go', { n: 1 }, { idempotencyKey: 'client-1' });
    expect(again).toEqual(first);
    await api.client.cancel(id);
  });
});
