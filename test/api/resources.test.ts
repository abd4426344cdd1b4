// Every endpoint's success path and representation.
import '../helpers/spec-matcher';
import { waitUntil } from '../helpers/wait-until';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { claimExecution, completeAs, createExecutionIn, registerTask, uniqueTask } from '../helpers/simulated-worker';
import { recordStepResult } from '../../src/store/steps';
import { queryRows } from '../../src/store/db';

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

describe('executions', () => {
  test('schedule answers 201 with execution_id (UUIDv7), task, pending and created_at', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task, { type: 'object' });
    const res = await api.call('POST', '/api/v1/executions', { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ task, data: { a: 1 } }) });
    expect(res.status).toBe(201);
    const body = res.body as { execution_id: string; created_at: string };
    expect(body).toMatchObject({ task, status: 'pending' });
    expect(body.execution_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(body.created_at).toMatch(ISO_MS);
  });

  test('a newly registered task can be scheduled at once (no stale "not registered" cache)', async () => {
    const task = uniqueTask('late');
    await expect(api.client.schedule(task)).rejects.toMatchObject({ code: 'task_not_registered' });
    await registerTask(api.db, task);
    expect((await api.client.schedule(task)).created).toBe(true);
  });

  test('a pending execution reads with every field of the resource, nulls where nothing happened yet', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const { execution_id } = await api.client.schedule(task, { orderId: 'o-1' });
    const e = await api.client.get(execution_id);
    expect(e).toEqual({
      execution_id,
      task,
      status: 'pending',
      data: { orderId: 'o-1' },
      steps_completed: 0,
      current_step: null,
      waiting_for_event: null,
      waiting_for_events: [],
      attempt: 0,
      created_at: expect.stringMatching(ISO_MS),
      start_at: null,
      started_at: null,
      completed_at: null,
      output: null,
      error: null,
      parent_execution_id: null,
      tags: [],
      idempotency_key: null,
      priority: 0,
      concurrency_key: null,
      task_version: null,
    });
  });

  test('data is required and must be an object (SPEC §2.2); the client sends {} when it is omitted', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    for (const body of [{ task }, { task, data: null }, { task, data: [1] }, { task, data: 'x' }]) {
      const res = await api.call('POST', '/api/v1/executions', { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body/data' }] } });
    }
    const { execution_id } = await api.client.schedule(task);
    expect((await api.client.get(execution_id)).data).toEqual({});
  });

  test('a waiting execution shows waiting_for_event, attempt and started_at; a completed one its output', async () => {
    const w = await createExecutionIn(api.client, api.db, 'waiting', { eventName: 'approval' });
    const waiting = await api.client.get(w.id);
    expect(waiting).toMatchObject({ status: 'waiting', attempt: 1, current_step: 'approval', waiting_for_event: { event_name: 'approval', timeout_at: null } });
    expect(waiting.waiting_for_event?.since).toMatch(ISO_MS);
    expect(waiting.started_at).toMatch(ISO_MS);
    const c = await createExecutionIn(api.client, api.db, 'completed', { output: [1, 'two'] });
    const completed = await api.client.get(c.id);
    expect(completed).toMatchObject({ status: 'completed', output: [1, 'two'], error: null, waiting_for_event: null });
    expect(completed.completed_at).toMatch(ISO_MS);
  });

  test('list filters by status and task and reports the total', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await api.client.schedule(task, { i })).execution_id);
    await api.client.cancel(ids[1]);
    expect((await api.client.list({ task })).total).toBe(3);
    const cancelled = await api.client.list({ task, status: 'cancelled' });
    expect(cancelled).toMatchObject({ total: 1, limit: 50, offset: 0 });
    expect(cancelled.executions.map((e) => e.execution_id)).toEqual([ids[1]]);
    const newest = await api.client.list({ task, limit: 1 });
    expect(newest.executions[0].execution_id).toBe(ids[2]);
  });

  test('steps lists the recorded steps in call order with their status', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task);
    const { execution_id } = await api.client.schedule(task);
    expect(await api.client.listSteps(execution_id)).toEqual([]);
    const lease = await claimExecution(api.db, task, execution_id);
    await recordStepResult(api.db, lease, 0, 'load-order', { id: 'o-1' });
    await recordStepResult(api.db, lease, 1, 'charge', null);
    await completeAs(api.db, lease, 'done');
    const steps = await api.client.listSteps(execution_id);
    expect(steps.map((s) => [s.seq, s.name, s.kind, s.status, s.result])).toEqual([
      [0, 'load-order', 'step', 'completed', { id: 'o-1' }],
      [1, 'charge', 'step', 'completed', null],
    ]);
    expect(steps[0].started_at).toMatch(ISO_MS);
    expect((await api.client.get(execution_id)).steps_completed).toBe(2);
  });
});

describe('tasks', () => {
  test('tasks lists every registered task with its schemas and counts for every status', async () => {
    const task = uniqueTask('listed');
    const dataSchema = { type: 'object', properties: { n: { type: 'integer' } } };
    await registerTask(api.db, task, dataSchema, { go: { type: 'boolean' } });
    await api.client.schedule(task, { n: 1 });
    const { execution_id } = await api.client.schedule(task, { n: 2 });
    await api.client.cancel(execution_id);
    const listed = (await api.client.listTasks()).find((t) => t.name === task);
    expect(listed).toEqual({
      name: task,
      data_schema: dataSchema,
      event_schemas: { go: { type: 'boolean' } },
      cron: null,
      concurrency_limit: null,
      concurrency: null,
      rate_limit: null,
      debounce: null,
      versions: [],
      keys: [],
      updated_at: expect.stringMatching(ISO_MS),
      workers: 0,
      paused: false,
      counts: { pending: 1, running: 0, waiting: 0, completed: 0, failed: 0, cancelled: 1 },
    });
  });
});

describe('operations endpoints', () => {
  test('/healthz and /readyz answer 200 {status: ok}', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const res = await api.call('GET', path);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ status: 'ok' });
    }
  });

  test('/metrics serves Prometheus text with the HTTP histogram labelled by route template, never by raw id', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    await api.client.get(e.id);
    const res = await api.call('GET', '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toMatch(/stepwise_http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/executions\/:id",status="200"\} \d+/);
    expect(res.text).toContain('process_cpu_user_seconds_total');
    expect(res.text).not.toContain(e.id);
  });

  test('/metrics counts active executions by task and status, and the queue depth', async () => {
    const pending = await createExecutionIn(api.client, api.db, 'pending');
    const waiting = await createExecutionIn(api.client, api.db, 'waiting');
    const value = (text: string, line: RegExp) => Number(line.exec(text)?.[1] ?? NaN);
    // Scrapes share a reading for up to 2 s; wait for one taken after these executions existed.
    const text = await waitUntil(async () => {
      const res = await api.call('GET', '/metrics');
      return value(res.text, new RegExp(`stepwise_executions\\{task="${waiting.task}",status="waiting"\\} (\\d+)`)) >= 1 ? res.text : undefined;
    }, 'the queue metrics to include the new executions');
    expect(value(text, new RegExp(`stepwise_executions\\{task="${pending.task}",status="pending"\\} (\\d+)`))).toBe(1);
    expect(value(text, /stepwise_queue_depth\{state="pending"\} (\d+)/)).toBeGreaterThanOrEqual(1);
    expect(value(text, /stepwise_queue_depth\{state="waiting"\} (\d+)/)).toBeGreaterThanOrEqual(1);
  });

  test('/metrics counts pending executions that are not due yet as scheduled, not as queued for a worker', async () => {
    const task = uniqueTask('later');
    await registerTask(api.db, task);
    await api.client.schedule(task, {}, { startAt: new Date(Date.now() + 3_600_000) });
    const value = (text: string, line: RegExp) => Number(line.exec(text)?.[1] ?? NaN);
    const text = await waitUntil(async () => {
      const res = await api.call('GET', '/metrics');
      return value(res.text, new RegExp(`stepwise_executions\\{task="${task}",status="pending"\\} (\\d+)`)) === 1 ? res.text : undefined;
    }, 'the queue metrics to include the delayed execution');
    // No worker runs here, so nothing changes between the scrape and these counts.
    const [counts] = await queryRows<{ due: number; later: number }>(
      api.db,
      "SELECT count(*) FILTER (WHERE due_at <= now())::int AS due, count(*) FILTER (WHERE due_at > now())::int AS later FROM stepwise.executions WHERE status = 'pending'",
    );
    expect(counts.later).toBeGreaterThanOrEqual(1);
    expect(value(text, /stepwise_queue_depth\{state="scheduled"\} (\d+)/)).toBe(counts.later);
    expect(value(text, /stepwise_queue_depth\{state="pending"\} (\d+)/)).toBe(counts.due);
  });
});
