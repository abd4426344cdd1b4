// SPEC.md, row by row, against a real server and worker over plain HTTP. This test knows only what
// SPEC.md says: no typed client and no openapi.yaml checks, so the two cannot drift apart unnoticed.
import { randomUUID } from 'node:crypto';
import { defineTask, Type } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { startWorker } from '../helpers/worker';
import { waitUntil } from '../helpers/wait-until';

let api: TestApi;
let worker: Worker;
const gates = new Map<string, () => void>();

/** Holds the handler in its `hold` step until the test calls gates.get(id)(), or it is cancelled. */
function hold(ctx: { executionId: string; signal: AbortSignal }): Promise<void> {
  return new Promise<void>((resolve) => {
    gates.set(ctx.executionId, resolve);
    ctx.signal.addEventListener('abort', () => resolve());
  });
}

const quick = defineTask({
  name: 'spec-quick',
  data: Type.Object({ i: Type.Integer() }),
  async run(ctx, data) {
    return ctx.step('echo', () => ({ i: data.i }));
  },
});

const held = defineTask({
  name: 'spec-held',
  data: Type.Object({ n: Type.Integer() }),
  async run(ctx, data) {
    const a = await ctx.step('add', () => data.n + 1);
    await ctx.step('hold', () => hold(ctx));
    return { result: a * 2 };
  },
});

// With one slot, a second execution stays pending while the first is held: a pending execution
// that no worker can race the test to.
const single = defineTask({
  name: 'spec-single',
  data: Type.Object({}),
  concurrency: { limit: 1 },
  async run(ctx) {
    await ctx.step('hold', () => hold(ctx));
    return {};
  },
});

const approval = defineTask({
  name: 'spec-approval',
  data: Type.Object({ order: Type.String() }),
  events: { decision: Type.Object({ approved: Type.Boolean(), by: Type.String() }) },
  async run(ctx, data) {
    await ctx.step('prepare', () => 'ready');
    const d = await ctx.waitForEvent('decision', { timeout: '1h' });
    return { order: data.order, approved: d.approved, approver: d.by };
  },
});

// Tasks whose executions only the list tests create, so totals and orders are exact.
const listed = defineTask({ name: 'spec-listed', data: Type.Object({ i: Type.Integer() }), run: async (_ctx, data) => ({ i: data.i }) });
const bulk = defineTask({ name: 'spec-bulk', data: Type.Object({ i: Type.Integer() }), run: async (_ctx, data) => ({ i: data.i }) });
// No Data type: only §2.2's "data is required" can refuse a request without it.
const untyped = defineTask({ name: 'spec-untyped', run: async () => ({}) });

beforeAll(async () => {
  api = await startTestApi();
  worker = await startWorker(api.t, [quick, held, single, approval, listed, bulk, untyped] as never, { concurrency: 16 });
});
afterAll(async () => {
  for (const release of gates.values()) release();
  await worker.stop();
  await api.close();
});

type Json = any;
interface Answer {
  method: string;
  path: string;
  status: number;
  contentType: string | null;
  text: string;
  body: Json;
}
/** Every answer this file received, for §1.4. */
const answers: Answer[] = [];

async function http(method: string, path: string, body?: unknown): Promise<Answer> {
  const init: RequestInit = { method };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { 'Content-Type': 'application/json' };
  }
  const res = await fetch(`${api.api.url}${path}`, init);
  const text = await res.text();
  let parsed: Json;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const answer = { method, path, status: res.status, contentType: res.headers.get('content-type'), text, body: parsed };
  answers.push(answer);
  return answer;
}

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|\+00:00)$/;
function expectIsoUtc(value: unknown): void {
  expect(value).toEqual(expect.stringMatching(ISO_UTC));
  expect(Number.isNaN(Date.parse(value as string))).toBe(false);
}

/** §2.4: `{error: {code, message}}` with the status §7 gives the code. */
function expectError(answer: Answer, status: number, code: string): void {
  expect({ status: answer.status, code: answer.body?.error?.code }).toEqual({ status, code });
  expect(typeof answer.body.error.message).toBe('string');
  expect(answer.body.error.message.length).toBeGreaterThan(0);
}

async function schedule(task: string, data: unknown, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await http('POST', '/api/v1/executions', { task, data, ...extra });
  expect(res.status).toBe(201);
  return res.body.execution_id;
}
const status = async (id: string) => (await http('GET', `/api/v1/executions/${id}`)).body;
const list = async (query: string) => (await http('GET', `/api/v1/executions?${query}`)).body;

async function finished(id: string): Promise<Json> {
  return waitUntil(async () => {
    const e = await status(id);
    return ['completed', 'failed', 'cancelled'].includes(e.status) ? e : undefined;
  }, `execution ${id} to finish`);
}
async function heldAt(id: string): Promise<void> {
  await waitUntil(() => gates.has(id), `execution ${id} to reach its held step`);
  // A handler starts as its claim's COMMIT is sent: the claim is visible a moment later.
  await waitUntil(async () => (await status(id)).status === 'running', `the claim of ${id} to commit`);
}
async function waitingForDecision(order: string): Promise<string> {
  const id = await schedule('spec-approval', { order });
  const e = await waitUntil(async () => {
    const s = await status(id);
    return s.status === 'waiting' ? s : undefined;
  }, 'the execution to wait for its event');
  expect(e.waiting_for_event).not.toBeNull();
  return id;
}
const unknownId = () => randomUUID();

describe('§3 / §4.1 schedule', () => {
  test('§4.1 schedule answers 201 with execution_id, task, status pending, created_at', async () => {
    const res = await http('POST', '/api/v1/executions', { task: 'spec-quick', data: { i: 1 }, idempotency_key: randomUUID() });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ execution_id: expect.any(String), task: 'spec-quick', status: 'pending' });
    expectIsoUtc(res.body.created_at);
  });
});

describe('§2.1 / §4.2 status read', () => {
  test('§4.2 the status read has every field of §2.1, with ISO 8601 UTC timestamps, while running and once completed', async () => {
    const id = await schedule('spec-held', { n: 20 });
    await heldAt(id);
    const fields = ['execution_id', 'task', 'status', 'steps_completed', 'current_step', 'waiting_for_event', 'started_at', 'completed_at', 'output', 'error'];
    // The step's name is recorded as it starts, not necessarily before the handler's body runs.
    const running = await waitUntil(async () => {
      const e = await status(id);
      return e.current_step === 'hold' ? e : undefined;
    }, 'the hold step to be current');
    expect(Object.keys(running)).toEqual(expect.arrayContaining(fields));
    expect(running).toMatchObject({ execution_id: id, task: 'spec-held', status: 'running', current_step: 'hold', waiting_for_event: null, completed_at: null, output: null, error: null });
    expect(Number.isInteger(running.steps_completed)).toBe(true);
    expectIsoUtc(running.started_at);

    gates.get(id)!();
    const done = await finished(id);
    expect(Object.keys(done)).toEqual(expect.arrayContaining(fields));
    expect(done).toMatchObject({ execution_id: id, status: 'completed', steps_completed: 2, waiting_for_event: null, output: { result: 42 }, error: null });
    expectIsoUtc(done.started_at);
    expectIsoUtc(done.completed_at);
  });

  test('§4.2 the status read of an unknown id answers 404 execution_not_found', async () => {
    expectError(await http('GET', `/api/v1/executions/${unknownId()}`), 404, 'execution_not_found');
  });
});

describe('§2.4 / §7 error envelope for each code', () => {
  test('§7 execution_not_found is 404 for an unknown id (status read, event delivery)', async () => {
    const id = unknownId();
    expectError(await http('GET', `/api/v1/executions/${id}`), 404, 'execution_not_found');
    expectError(await http('POST', `/api/v1/events/${id}/decision`, { approved: true }), 404, 'execution_not_found');
  });

  test('§4.1 / §7 task_not_registered is 422 for a task without a handler', async () => {
    expectError(await http('POST', '/api/v1/executions', { task: 'spec-no-such-task', data: {} }), 422, 'task_not_registered');
  });

  test('§2.2 / §7 invalid_data is 422 for a body that fails validation', async () => {
    expectError(await http('POST', '/api/v1/executions', { task: 'spec-quick' }), 422, 'invalid_data');
    expectError(await http('POST', '/api/v1/executions', { task: 42, data: {} }), 422, 'invalid_data');
    expectError(await http('POST', '/api/v1/executions', { task: 'spec-quick', data: { i: 'one' } }), 422, 'invalid_data');
  });

  test('§2.2 / §7 a schedule request without data is 422 invalid_data even when the task declares no Data type', async () => {
    expectError(await http('POST', '/api/v1/executions', { task: 'spec-untyped' }), 422, 'invalid_data');
  });

  test('§6.2 / §7 not_waiting_for_event is 409 for an execution that is not waiting', async () => {
    const id = await schedule('spec-quick', { i: 2 });
    await finished(id);
    expectError(await http('POST', `/api/v1/events/${id}/decision`, { approved: true, by: 'ada' }), 409, 'not_waiting_for_event');
  });

  test('§4.1 / §7 execution_already_exists is 409 for the same idempotency_key with a different task', async () => {
    const key = randomUUID();
    await schedule('spec-quick', { i: 3 }, { idempotency_key: key });
    const res = await http('POST', '/api/v1/executions', { task: 'spec-approval', data: { order: 'o-1' }, idempotency_key: key });
    expectError(res, 409, 'execution_already_exists');
  });
});

describe('§3 / §4.5 cancel', () => {
  test('§3 / §4.5 cancel of a pending execution answers 200 with execution_id and status cancelled', async () => {
    const blocker = await schedule('spec-single', {});
    await heldAt(blocker);
    const id = await schedule('spec-single', {});
    expect((await status(id)).status).toBe('pending');
    const res = await http('POST', `/api/v1/executions/${id}/cancel`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ execution_id: id, status: 'cancelled' });
    expect((await status(id)).status).toBe('cancelled');
    gates.get(blocker)!();
  });

  test('§3 / §4.5 cancel of a running execution answers 200 with execution_id and status cancelled', async () => {
    const id = await schedule('spec-held', { n: 1 });
    await heldAt(id);
    expect((await status(id)).status).toBe('running');
    const res = await http('POST', `/api/v1/executions/${id}/cancel`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ execution_id: id, status: 'cancelled' });
    expect((await finished(id)).status).toBe('cancelled');
  });
});

describe('§3 / §4.6 / §6 events', () => {
  test('§3 / §4.6 an event the execution waits for answers 200 with status delivered, execution_id, event_name', async () => {
    const id = await waitingForDecision('o-2');
    const res = await http('POST', `/api/v1/events/${id}/decision`, { approved: true, by: 'ada' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'delivered', execution_id: id, event_name: 'decision' });
  });

  test('§4.6 the handler receives the payload, and the execution completes with an output built from it', async () => {
    const id = await waitingForDecision('o-3');
    expect((await http('POST', `/api/v1/events/${id}/decision`, { approved: false, by: 'grace' })).status).toBe(200);
    expect(await finished(id)).toMatchObject({ status: 'completed', output: { order: 'o-3', approved: false, approver: 'grace' } });
  });

  test('§4.6 an event for an unknown execution answers 404 execution_not_found', async () => {
    expectError(await http('POST', `/api/v1/events/${unknownId()}/decision`, { approved: true, by: 'ada' }), 404, 'execution_not_found');
  });

  test('§4.6 / §6.2 an event of another name answers 409 not_waiting_for_event, and the execution keeps waiting', async () => {
    const id = await waitingForDecision('o-4');
    expectError(await http('POST', `/api/v1/events/${id}/other`, { approved: true, by: 'ada' }), 409, 'not_waiting_for_event');
    expect((await status(id)).status).toBe('waiting');
  });
});

describe('§4.3 / §8 list', () => {
  const ids: string[] = [];
  beforeAll(async () => {
    // One after the other, so created_at gives them a known order.
    for (const i of [1, 2, 3]) ids.push(await schedule('spec-listed', { i }));
    for (const id of ids) await finished(id);
  });

  test('§4.3 the list answers executions (items with execution_id, task, status, started_at), total, limit, offset', async () => {
    const page = await list('task=spec-listed');
    expect(page).toMatchObject({ total: 3, limit: expect.any(Number), offset: 0 });
    expect(page.executions).toHaveLength(3);
    for (const item of page.executions) {
      expect(item).toMatchObject({ execution_id: expect.any(String), task: 'spec-listed', status: 'completed' });
      expectIsoUtc(item.started_at);
    }
  });

  test('§4.3 / §8 the default limit is 50', async () => {
    await Promise.all(Array.from({ length: 55 }, (_, i) => schedule('spec-bulk', { i })));
    const page = await list('task=spec-bulk');
    expect(page).toMatchObject({ total: 55, limit: 50 });
    expect(page.executions).toHaveLength(50);
  });

  test('§4.3 / §8 a limit above 500 is answered with at most 500', async () => {
    const res = await http('GET', '/api/v1/executions?limit=501');
    expect(res.status).toBe(200);
    expect(res.body.limit).toBeLessThanOrEqual(500);
    expect(res.body.executions.length).toBeLessThanOrEqual(500);
  });

  test('§4.3 status and task filter the list', async () => {
    expect(await list('task=spec-listed&status=completed')).toMatchObject({ total: 3 });
    expect(await list('task=spec-listed&status=cancelled')).toMatchObject({ total: 0, executions: [] });
    const completed = await list('status=completed');
    expect(completed.executions.length).toBeGreaterThan(0);
    expect(completed.executions.every((e: Json) => e.status === 'completed')).toBe(true);
    const byTask = await list('task=spec-quick');
    expect(byTask.executions.length).toBeGreaterThan(0);
    expect(byTask.executions.every((e: Json) => e.task === 'spec-quick')).toBe(true);
  });

  test('§4.3 order sorts by created_at, asc or desc, and desc by default', async () => {
    const idsOf = (page: Json) => page.executions.map((e: Json) => e.execution_id);
    expect(idsOf(await list('task=spec-listed&order=asc'))).toEqual(ids);
    expect(idsOf(await list('task=spec-listed&order=desc'))).toEqual([...ids].reverse());
    expect(idsOf(await list('task=spec-listed'))).toEqual([...ids].reverse());
  });

  test('§4.3 offset paginates, and the answer gives the offset applied', async () => {
    const first = await list('task=spec-listed&order=asc&limit=2&offset=0');
    const second = await list('task=spec-listed&order=asc&limit=2&offset=2');
    expect(first).toMatchObject({ total: 3, limit: 2, offset: 0 });
    expect(second).toMatchObject({ total: 3, limit: 2, offset: 2 });
    expect([...first.executions, ...second.executions].map((e: Json) => e.execution_id)).toEqual(ids);
  });
});

describe('§4.4 / §8 wait', () => {
  test('§4.4 a wait (default timeout) on a completed execution answers 200 with execution_id, status completed, output, completed_at', async () => {
    const id = await schedule('spec-quick', { i: 7 });
    await finished(id);
    const res = await http('GET', `/api/v1/executions/${id}/wait`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ execution_id: id, status: 'completed', output: { i: 7 } });
    expectIsoUtc(res.body.completed_at);
  });

  test('§4.4 a wait whose timeout expires on a running execution answers 202 with execution_id, status running, message', async () => {
    const id = await schedule('spec-held', { n: 2 });
    await heldAt(id);
    const res = await http('GET', `/api/v1/executions/${id}/wait?timeout=1`);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ execution_id: id, status: 'running', message: expect.any(String) });
    gates.get(id)!();
  });

  test('§4.4 a wait in progress answers 200 once the execution completes', async () => {
    const id = await schedule('spec-held', { n: 4 });
    await heldAt(id);
    const waiting = http('GET', `/api/v1/executions/${id}/wait?timeout=30`);
    // Released after the request is sent: whether the server reads it before or after, the answer is 200.
    gates.get(id)!();
    const res = await waiting;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ execution_id: id, status: 'completed', output: { result: 10 } });
    expectIsoUtc(res.body.completed_at);
  });

  test('§4.4 / §8 a timeout above the 3600 maximum is not an error', async () => {
    const id = await schedule('spec-quick', { i: 8 });
    await finished(id);
    const res = await http('GET', `/api/v1/executions/${id}/wait?timeout=99999`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ execution_id: id, status: 'completed' });
  });
});

describe('§1.4 JSON', () => {
  // Declared last, so it sees the answers of every test above: success and error alike.
  test('§1.4 every response is JSON (content-type application/json, a body that parses)', () => {
    expect(answers.length).toBeGreaterThan(50);
    const notJson = answers.filter((a) => !/^application\/json\b/.test(a.contentType ?? '') || a.body === undefined);
    expect(notJson.map((a) => `${a.method} ${a.path} → ${a.status} ${a.contentType}: ${a.text.slice(0, 80)}`)).toEqual([]);
  });
});
