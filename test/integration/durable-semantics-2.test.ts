// Durable semantics, part 2 (issue #33): one test per row of the table, against a real worker
// and API server.
import { defineTask } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

let api: TestApi;
let worker: Worker;
const counts = new Map<string, number>();
const bump = (key: string) => {
  const n = (counts.get(key) ?? 0) + 1;
  counts.set(key, n);
  return n;
};

const hangsOnce = defineTask({
  name: 'ds2-hangs-once',
  timeout: 600,
  async run(ctx) {
    return ctx.step('work', async () => {
      // The first run outlives the timeout; the retried one takes a while, well within a fresh one.
      if (bump(`hang:${ctx.executionId}`) === 1) return new Promise(() => undefined);
      await new Promise((r) => setTimeout(r, 300));
      return 'done';
    });
  },
});

const gates = new Map<string, () => void>();
/** Resolves when the test opens the gate `key`. */
const gate = (key: string) => new Promise<void>((resolve) => gates.set(key, resolve));

const waitBesideStep = defineTask({
  name: 'ds2-wait-beside-step',
  async run(ctx) {
    const [, go] = await Promise.all([ctx.step('slow', () => gate(`slow:${ctx.executionId}`)), ctx.waitForEvent('go')]);
    return go;
  },
});

const waitsForOthers = defineTask({
  name: 'ds2-waits-for-others',
  async run(ctx) {
    const [a, b] = await Promise.all([ctx.waitForEvent('approve'), ctx.waitForEvent('review')]);
    return { a, b };
  },
});

const tasks = [hangsOnce, waitBesideStep, waitsForOthers];

beforeAll(async () => {
  api = await startTestApi();
  worker = await startWorker(api.t, tasks as never, { pollIntervalMs: 100, shutdownGraceMs: 200 });
});
afterAll(async () => {
  await worker.stop();
  await api.close();
});

async function run(task: string, data: Record<string, unknown> = {}) {
  const { execution_id } = await api.client.schedule(task, data);
  return execution_id;
}

const finished = (id: string, deadlineMs = 15_000) => api.client.wait(id, { deadlineMs });
const JSON_HEADERS = { 'Content-Type': 'application/json' };

describe('retry after a timeout', () => {
  test("a retry of an execution that failed on its task's timeout gets a fresh timeout", async () => {
    const id = await run(hangsOnce.name);
    expect(await finished(id)).toMatchObject({ status: 'failed', error: { type: 'ExecutionTimeoutError' } });
    const before = await api.client.get(id);
    expect(await api.client.retry(id)).toMatchObject({ execution_id: id });
    const done = await waitUntil(async () => {
      const e = await api.client.get(id);
      return e.status === 'completed' || e.status === 'failed' ? e : undefined;
    }, 'the retried execution to finish');
    expect(done).toMatchObject({ status: 'completed', output: 'done' });
    expect(counts.get(`hang:${id}`)).toBe(2);
    // started_at still tells when the execution first ran.
    expect(done.started_at).toBe(before.started_at);
  });
});

describe('an event that finds no wait says why', () => {
  const send = (id: string, name: string, body = 'true') => api.call('POST', `/api/v1/events/${id}/${name}`, { headers: JSON_HEADERS, body });

  test('an event for a running execution whose wait is not recorded yet is 409 not_waiting_yet with Retry-After; later it is delivered', async () => {
    const id = await run(waitBesideStep.name);
    await waitUntil(() => gates.has(`slow:${id}`), 'the step to run');
    // A handler starts as its claim's COMMIT is sent, so the claim may not be visible for a moment yet.
    await waitUntil(async () => (await api.client.get(id)).status === 'running', 'the claim to commit');
    const early = await send(id, 'go');
    expect(early.status).toBe(409);
    expect(early.headers.get('retry-after')).toBe('1');
    expect(early.body).toMatchObject({ error: { code: 'not_waiting_for_event', reason: 'not_waiting_yet', execution_status: 'running', waiting_for: [] } });
    expect((early.body as { error: { message: string } }).error.message).toMatch(/not waiting for event "go" yet: it is running/);

    gates.get(`slow:${id}`)?.();
    await waitUntil(async () => (await api.client.get(id)).status === 'waiting', 'the execution to suspend on its wait');
    expect((await send(id, 'go')).status).toBe(200);
    expect(await finished(id)).toMatchObject({ status: 'completed', output: true });

    const late = await send(id, 'go');
    expect(late.status).toBe(409);
    expect(late.headers.get('retry-after')).toBeNull();
    expect(late.body).toMatchObject({ error: { code: 'not_waiting_for_event', reason: 'not_waiting', execution_status: 'completed', waiting_for: [] } });
    expect((late.body as { error: { message: string } }).error.message).toMatch(/not waiting for event "go": it is completed/);
  });

  test('an event for an execution that waits for others is 409 not_waiting, naming the events it waits for', async () => {
    const id = await run(waitsForOthers.name);
    await waitUntil(async () => (await api.client.get(id)).waiting_for_events.length === 2, 'both waits open');
    const other = await send(id, 'ship');
    expect(other.status).toBe(409);
    expect(other.headers.get('retry-after')).toBeNull();
    expect(other.body).toMatchObject({ error: { code: 'not_waiting_for_event', reason: 'not_waiting', execution_status: 'waiting' } });
    const error = (other.body as { error: { message: string; waiting_for: string[] } }).error;
    expect([...error.waiting_for].sort()).toEqual(['approve', 'review']);
    expect(error.message).toMatch(/it waits for "(approve|review)", "(approve|review)"/);

    // The typed client carries the same facts.
    const thrown = await api.client.sendEvent(id, 'ship', true).catch((err: unknown) => err);
    expect(thrown).toMatchObject({ code: 'not_waiting_for_event', status: 409, facts: { reason: 'not_waiting', execution_status: 'waiting' } });
  });
});
