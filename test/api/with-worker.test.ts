// The wait, cancel and event endpoints with a real worker running the handlers (not a simulation).
import { defineTask, Type } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { startWorker } from '../helpers/worker';
import { waitUntil } from '../helpers/wait-until';

let api: TestApi;
let worker: Worker;
const gates = new Map<string, () => void>();
const aborted = new Set<string>();
const JSON_HEADERS = { 'Content-Type': 'application/json' };

const steps = defineTask({
  name: 'api-steps',
  data: Type.Object({ n: Type.Integer() }),
  async run(ctx, data) {
    const a = await ctx.step('add', () => data.n + 1);
    const b = await ctx.step('hold', async () => {
      await new Promise<void>((resolve) => {
        gates.set(ctx.executionId, resolve);
        ctx.signal.addEventListener('abort', () => {
          aborted.add(ctx.executionId);
          resolve();
        });
      });
      return a * 2;
    });
    return { result: b };
  },
});

const approval = defineTask({
  name: 'api-approval',
  events: { decision: Type.Object({ approved: Type.Boolean() }, { additionalProperties: false }) },
  async run(ctx) {
    await ctx.step('prepare', () => 'ready');
    const d = await ctx.waitForEvent('decision', { timeout: '1h' });
    return { approved: d.approved };
  },
});

const quick = defineTask({
  name: 'api-quick',
  data: Type.Object({ i: Type.Integer() }),
  async run(ctx, data) {
    return ctx.step('echo', () => data.i);
  },
});

beforeAll(async () => {
  api = await startTestApi();
  worker = await startWorker(api.t, [steps, approval, quick] as never, { concurrency: 16 });
});
afterAll(async () => {
  for (const release of gates.values()) release();
  await worker.stop();
  await api.close();
});

async function get(id: string) {
  return api.client.get(id);
}

describe('with a real worker', () => {
  test('status fields are right at each point, and wait answers 200 with the output once it completes', async () => {
    const { execution_id: id } = await api.client.schedule('api-steps', { n: 20 });
    const holding = await waitUntil(async () => {
      const e = await get(id);
      return e.current_step === 'hold' ? e : undefined;
    }, 'the hold step to be current');
    expect(holding).toMatchObject({ status: 'running', steps_completed: 1, waiting_for_event: null, attempt: 1, completed_at: null, output: null });
    expect(holding.started_at).not.toBeNull();
    const early = await api.call('GET', `/api/v1/executions/${id}/wait?timeout=0`);
    expect(early.status).toBe(202);
    expect(early.body).toMatchObject({ execution_id: id, status: 'running' });
    const waiting = api.client.wait(id, { timeoutSeconds: 30 });
    gates.get(id)!();
    const done = await waiting;
    expect(done).toMatchObject({ status: 'completed', steps_completed: 2, current_step: null, output: { result: 42 }, error: null });
  });

  test('an event delivered over HTTP resumes the handler; a wrong payload is 422 and it keeps waiting', async () => {
    const { execution_id: id } = await api.client.schedule('api-approval', {});
    const waiting = await waitUntil(async () => {
      const e = await get(id);
      return e.status === 'waiting' ? e : undefined;
    }, 'waiting for the event');
    expect(waiting.waiting_for_event).toMatchObject({ event_name: 'decision' });
    expect(waiting).toMatchObject({ steps_completed: 1, current_step: 'decision' });
    const bad = await api.call('POST', `/api/v1/events/${id}/decision`, { headers: JSON_HEADERS, body: '{"approved":"yes"}' });
    expect(bad.status).toBe(422);
    expect((await get(id)).status).toBe('waiting');
    const wrongName = await api.call('POST', `/api/v1/events/${id}/other`, { headers: JSON_HEADERS, body: '{}' });
    expect(wrongName.status).toBe(409);
    expect(await api.client.sendEvent(id, 'decision', { approved: true })).toMatchObject({ execution_id: id, event_name: 'decision' });
    const done = await api.client.wait(id, { timeoutSeconds: 30 });
    expect(done).toMatchObject({ status: 'completed', output: { approved: true }, steps_completed: 2 });
  });

  test('two concurrent deliveries of the same event: exactly one 200 and one 409', async () => {
    const { execution_id: id } = await api.client.schedule('api-approval', {});
    await waitUntil(async () => (await get(id)).status === 'waiting', 'waiting');
    const [a, b] = await Promise.all(
      [true, false].map((approved) => api.call('POST', `/api/v1/events/${id}/decision`, { headers: JSON_HEADERS, body: JSON.stringify({ approved }) })),
    );
    expect([a.status, b.status].sort()).toEqual([200, 409]);
    const winner = a.status === 200 ? true : false;
    const done = await api.client.wait(id, { timeoutSeconds: 30 });
    expect(done.output).toEqual({ approved: winner });
  });

  test('cancel of a running execution aborts ctx.signal, and its late result is discarded', async () => {
    const { execution_id: id } = await api.client.schedule('api-steps', { n: 1 });
    await waitUntil(async () => gates.has(id), 'the handler to reach the held step');
    expect(await api.client.cancel(id)).toEqual({ execution_id: id, status: 'cancelled' });
    await waitUntil(() => aborted.has(id), 'ctx.signal to abort');
    await waitUntil(() => worker.busy === 0, 'the worker to let go');
    const e = await api.client.wait(id, { timeoutSeconds: 5 });
    expect(e).toMatchObject({ status: 'cancelled', output: null, steps_completed: 1 });
    expect(e.error).toMatchObject({ type: 'cancelled' });
  });

  test('cancel of a waiting execution ends it; a later event gets 409', async () => {
    const { execution_id: id } = await api.client.schedule('api-approval', {});
    await waitUntil(async () => (await get(id)).status === 'waiting', 'waiting');
    expect((await api.client.cancel(id)).status).toBe('cancelled');
    const late = await api.call('POST', `/api/v1/events/${id}/decision`, { headers: JSON_HEADERS, body: '{"approved":true}' });
    expect(late.status).toBe(409);
    expect((await get(id)).status).toBe('cancelled');
  });

  test('a cancel racing a completion ends in exactly one final state, consistent with its answer', async () => {
    const scheduled = await Promise.all(Array.from({ length: 40 }, (_, i) => api.client.schedule('api-quick', { i })));
    const answers = await Promise.all(
      scheduled.map((s) => api.call('POST', `/api/v1/executions/${s.execution_id}/cancel`).then((r) => ({ id: s.execution_id, status: r.status }))),
    );
    for (const { id, status } of answers) {
      const e = await api.client.wait(id, { timeoutSeconds: 10 });
      if (status === 200) expect(e).toMatchObject({ status: 'cancelled', output: null });
      else {
        expect(status).toBe(409);
        expect(e.status).toBe('completed');
      }
    }
  });
});
