// An execution's id in any case reaches the same execution on every route, and every answer names it
// as the API writes it (lower case). The transitions compared the id as sent with PostgreSQL's, so an
// upper-case retry was made and then answered 409; /wait and /stream answered 404.
import { defineTask, NonRetryableError } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { startWorker } from '../helpers/worker';
import { waitUntil } from '../helpers/wait-until';

let fail = true;
const flaky = defineTask({
  name: 'ids-flaky',
  run: async () => {
    if (fail) throw new NonRetryableError('not yet');
    return 'done';
  },
});
const waiting = defineTask({ name: 'ids-waiting', run: async (ctx) => ctx.waitForEvent('go') });

let api: TestApi;
let worker: Worker;
beforeAll(async () => {
  api = await startTestApi();
  worker = await startWorker(api.t, [flaky, waiting] as never);
});
afterAll(async () => {
  await worker.stop();
  await api.close();
});

const JSON_HEADERS = { 'Content-Type': 'application/json' };
const statusOf = async (id: string) => (await api.client.get(id)).status;

test('retry, cancel, events, wait, stream, steps and attempts take an upper-case id and answer the canonical one', async () => {
  const { execution_id: failedId } = await api.client.schedule('ids-flaky', {});
  await waitUntil(async () => ((await statusOf(failedId)) === 'failed' ? true : undefined), 'the first attempt to fail');
  const FAILED = failedId.toUpperCase();
  fail = false;

  const retried = await api.call('POST', `/api/v1/executions/${FAILED}/retry`);
  expect(retried.status).toBe(200);
  expect(retried.body).toMatchObject({ execution_id: failedId });
  const waited = await api.call('GET', `/api/v1/executions/${FAILED}/wait?timeout=10`);
  expect(waited.status).toBe(200);
  expect(waited.body).toMatchObject({ execution_id: failedId, status: 'completed', output: 'done' });
  expect((await api.call('GET', `/api/v1/executions/${FAILED}`)).body).toMatchObject({ execution_id: failedId });
  expect((await api.call('GET', `/api/v1/executions/${FAILED}/attempts`)).status).toBe(200);
  expect((await api.call('GET', `/api/v1/executions/${FAILED}/steps`)).status).toBe(200);

  const { execution_id: waitingId } = await api.client.schedule('ids-waiting', {});
  await waitUntil(async () => ((await statusOf(waitingId)) === 'waiting' ? true : undefined), 'the execution to wait');
  const WAITING = waitingId.toUpperCase();
  const stream = await api.fetch(new Request(`${api.api.url}/api/v1/executions/${WAITING}/stream`, { headers: { Accept: 'text/event-stream' } }));
  expect(stream.status).toBe(200);
  const first = await stream.body!.getReader().read();
  expect(new TextDecoder().decode(first.value)).toContain(waitingId);
  await stream.body!.cancel().catch(() => undefined);
  const delivered = await api.call('POST', `/api/v1/events/${WAITING}/go`, { headers: JSON_HEADERS, body: '1' });
  expect(delivered.status).toBe(200);
  expect(delivered.body).toMatchObject({ execution_id: waitingId });
  expect(await api.client.wait(waitingId, { deadlineMs: 10_000 })).toMatchObject({ status: 'completed', output: 1 });

  const { execution_id: toCancel } = await api.client.schedule('ids-waiting', {});
  await waitUntil(async () => ((await statusOf(toCancel)) === 'waiting' ? true : undefined), 'the execution to wait');
  const cancelled = await api.call('POST', `/api/v1/executions/${toCancel.toUpperCase()}/cancel`);
  expect(cancelled.status).toBe(200);
  expect(cancelled.body).toEqual({ execution_id: toCancel, status: 'cancelled' });
  expect((await api.call('GET', `/api/v1/executions?parent_execution_id=${toCancel.toUpperCase()}`)).status).toBe(200);
});
