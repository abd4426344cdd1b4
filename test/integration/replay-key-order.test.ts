// Values read back from the history replay byte for byte (issue #33, row 3): a replay sees an object's
// keys in the order the first run saw them, or the handler would take another branch with no error.
// The worker keeps no handler suspended, so every wake-up replays the handler from its history.
import { defineTask } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

let api: TestApi;
let worker: Worker;
const firstKeys = new Map<string, string[]>();
const noteFirstKey = (id: string, value: unknown) => {
  firstKeys.set(id, [...(firstKeys.get(id) ?? []), Object.keys(value as object)[0]]);
};

const stepThenSleep = defineTask({
  name: 'order-step-then-sleep',
  async run(ctx) {
    const offer = await ctx.step('offer', () => ({ zeta: 30, beta: 10 }));
    noteFirstKey(ctx.executionId, offer);
    await ctx.sleep('nap', 50);
    return offer;
  },
});

const eventThenSleep = defineTask({
  name: 'order-event-then-sleep',
  async run(ctx) {
    const payload = await ctx.waitForEvent('offer');
    noteFirstKey(ctx.executionId, payload);
    await ctx.sleep('nap', 50);
    return payload;
  },
});

const offeringChild = defineTask({
  name: 'order-offering-child',
  async run() {
    return { zeta: 1, beta: 2 };
  },
});

const invokeThenSleep = defineTask({
  name: 'order-invoke-then-sleep',
  async run(ctx) {
    const result = await ctx.invoke('child', offeringChild, {});
    noteFirstKey(ctx.executionId, result);
    await ctx.sleep('nap', 50);
    return result;
  },
});

beforeAll(async () => {
  api = await startTestApi();
  worker = await startWorker(api.t, [stepThenSleep, eventThenSleep, offeringChild, invokeThenSleep] as never, { pollIntervalMs: 50, keepSuspended: 0 });
});
afterAll(async () => {
  await worker.stop();
  await api.close();
});

async function run(task: string) {
  const { execution_id } = await api.client.schedule(task, {});
  return execution_id;
}

const finished = (id: string) => api.client.wait(id, { deadlineMs: 15_000 });

test("a step's object result has its keys in the same order on the first run and on the replay", async () => {
  const id = await run(stepThenSleep.name);
  const done = await finished(id);
  expect(done.status).toBe('completed');
  expect(firstKeys.get(id)).toEqual(['zeta', 'zeta']);
  expect(Object.keys(done.output as object)).toEqual(['zeta', 'beta']);
});

test('an event payload delivered through the API is read back with its keys in the order it was sent', async () => {
  const id = await run(eventThenSleep.name);
  await waitUntil(async () => (await api.client.get(id)).waiting_for_events.length === 1, 'waiting for the offer');
  const delivered = await api.call('POST', `/api/v1/events/${id}/offer`, { headers: { 'Content-Type': 'application/json' }, body: '{"zeta":1,"beta":2}' });
  expect(delivered.status).toBe(200);
  const done = await finished(id);
  expect(done.status).toBe('completed');
  expect(firstKeys.get(id)).toEqual(['zeta', 'zeta']);
});

test("a child's result is read back with its keys in the order the child returned them", async () => {
  const id = await run(invokeThenSleep.name);
  const done = await finished(id);
  expect(done.status).toBe('completed');
  expect(firstKeys.get(id)).toEqual(['zeta', 'zeta']);
});

test('GET /executions/{id} shows the output as the handler returned it, keys in order', async () => {
  const id = await run(offeringChild.name);
  await finished(id);
  const response = await api.call('GET', `/api/v1/executions/${id}`);
  expect(response.status).toBe(200);
  expect(response.text).toContain('"output":{"zeta":1,"beta":2}');
});
