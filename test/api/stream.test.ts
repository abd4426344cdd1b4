// Live streams (issue 20, item 1): GET /executions/{id}/stream and GET /executions/changes over HTTP,
// driven by the LISTEN fan-out, through a PostgreSQL outage and a server shutdown.
import { defineTask } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { startWorker } from '../helpers/worker';
import { openEventStream, type OpenedStream, type WireEvent } from '../helpers/event-stream';
import { claimExecution, completeAs, createExecutionIn, failAs, registerTask, uniqueTask, waitForEventAs } from '../helpers/simulated-worker';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { createTcpProxy, type TcpProxy } from '../helpers/tcp-proxy';
import { waitUntil } from '../helpers/wait-until';
import { getSpec } from '../../src/api/spec';
import { createDb, type Db } from '../../src/store/db';
import { progressAnnouncement } from '../../src/store/progress';
import { CHANNEL_PROGRESS, CHANNEL_STREAMS, STREAMS_ASK, STREAMS_HELD } from '../../src/store/channels';
import pg from 'pg';
import { recordStepResult } from '../../src/store/steps';
import { claimExecutions } from '../../src/store/transitions/claim';
import { completeExecutions } from '../../src/store/transitions/complete';
import { failExecution } from '../../src/store/transitions/fail';

const executionSchema = () => {
  const validate = getSpec().operations.get('getExecution')?.response(200)?.validate;
  if (!validate) throw new Error('no schema for getExecution 200');
  return validate;
};

/** The event's Execution, checked against the contract's schema (the same JSON as GET /executions/{id}). */
function executionOf(e: WireEvent): Record<string, unknown> & { status: string; steps_completed: number } {
  expect(e.event).toBe('execution');
  const body = JSON.parse(e.data) as Record<string, unknown> & { status: string; steps_completed: number };
  const validate = executionSchema();
  if (!validate(body)) throw new Error(`event data is not an Execution: ${JSON.stringify(validate.errors)}`);
  return body;
}

/** The next `changed` event: a `sync` may come first (the server's LISTEN connection came up after the stream opened). */
async function nextChange(s: OpenedStream): Promise<Record<string, unknown>> {
  for (;;) {
    const e = await s.next();
    if (e.event === 'changed') return JSON.parse(e.data);
    expect(e.event).toBe('sync');
  }
}

async function streamsOpen(api: TestApi, kind: 'execution' | 'changes'): Promise<number> {
  const res = await api.call('GET', '/metrics');
  const match = new RegExp(`^stepwise_http_streams_open\\{stream="${kind}"\\} (\\d+)`, 'm').exec(res.text);
  return Number(match?.[1] ?? NaN);
}

describe('GET /executions/{id}/stream', () => {
  let api: TestApi;
  beforeAll(async () => {
    // No fallback re-check within the tests' waits: only notifications move the streams.
    api = await startTestApi({ http: { waitPollIntervalMs: 600000, streamKeepAliveMs: 100 } });
  });
  afterAll(async () => {
    await api.close();
  });

  const open = (id: string): Promise<OpenedStream> => openEventStream(`${api.api.url}/api/v1/executions/${id}/stream`);

  test('sends the current state first, then one event per change (running, step completed, waiting, terminal), and ends after the terminal one', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const stream = await open(e.id);
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(stream.response.headers.get('cache-control')).toBe('no-store');
    expect(stream.response.headers.get('x-request-id')).toBeTruthy();

    const first = await stream.next();
    expect(executionOf(first)).toEqual(await api.client.get(e.id));
    expect(first.id).toMatch(/^0-[0-9a-f]{12}$/);

    const lease = await claimExecution(api.db, e.task, e.id);
    const running = executionOf(await stream.next());
    expect(running).toMatchObject({ status: 'running', steps_completed: 0, attempt: 1 });

    // As a worker does: the step's record, then (apart) its announcement.
    await recordStepResult(api.db, lease, 0, 'reserve', { ok: true });
    await api.db.raw(progressAnnouncement([e.id]));
    const stepped = await stream.next();
    expect(executionOf(stepped)).toMatchObject({ status: 'running', steps_completed: 1 });
    expect(stepped.id).toMatch(/^1-/);

    await waitForEventAs(api.db, lease, 'approval', 1);
    const waiting = executionOf(await stream.next());
    expect(waiting).toMatchObject({ status: 'waiting', current_step: 'approval', waiting_for_event: { event_name: 'approval' } });
    expect(waiting).toEqual(await api.client.get(e.id));

    // The delivery makes it due; the claim that follows is the next change a stream hears of.
    await api.client.sendEvent(e.id, 'approval', { approved: true });
    const again = await claimExecution(api.db, e.task, e.id);
    const resumed = executionOf(stream.events.length > 4 ? stream.events[4] : await stream.next());
    if (resumed.status === 'waiting') expect(executionOf(await stream.next())).toMatchObject({ status: 'running', steps_completed: 2, waiting_for_events: [] });
    else expect(resumed).toMatchObject({ status: 'running', steps_completed: 2, waiting_for_events: [] });
    await completeAs(api.db, again, { total: 3 });
    const done = await stream.next();
    expect(executionOf(done)).toMatchObject({ status: 'completed', output: { total: 3 } });
    await expect(stream.ended).resolves.toBe(true);
    expect(stream.text().startsWith('retry: 1000\n\n')).toBe(true);
    expect(new Set(stream.events.map((x) => x.id)).size).toBe(stream.events.length);
  });

  test('a finished execution sends its state once and the stream ends at once', async () => {
    for (const state of ['completed', 'failed', 'cancelled'] as const) {
      const e = await createExecutionIn(api.client, api.db, state);
      const stream = await open(e.id);
      await expect(stream.ended).resolves.toBe(true);
      expect(stream.events.map((x) => executionOf(x).status)).toEqual([state]);
    }
  });

  test('a failed attempt to be retried later shows pending with its error, then the final failure', async () => {
    const e = await createExecutionIn(api.client, api.db, 'running');
    const stream = await open(e.id);
    expect(executionOf(await stream.next()).status).toBe('running');
    await failExecution(api.db, e.lease!, { type: 'Error', message: 'try again', retryable: true }, 0);
    expect(executionOf(await stream.next())).toMatchObject({ status: 'pending', error: { message: 'try again' } });
    const lease = await claimExecution(api.db, e.task, e.id);
    expect(executionOf(await stream.next())).toMatchObject({ status: 'running', attempt: 2 });
    await failAs(api.db, lease, 'gave up');
    expect(executionOf(await stream.next())).toMatchObject({ status: 'failed', error: { message: 'gave up' } });
    await expect(stream.ended).resolves.toBe(true);
  });

  test('an unknown or malformed id answers the 404 envelope as JSON, before any event', async () => {
    for (const id of ['0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10', 'not-an-id']) {
      const res = await api.call('GET', `/api/v1/executions/${id}/stream`);
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.body).toMatchObject({ error: { code: 'execution_not_found' } });
    }
    await waitUntil(async () => (await streamsOpen(api, 'execution')) === 0, 'no stream to stay registered');
  });

  test('HEAD answers the headers of a stream and holds nothing open', async () => {
    const e = await createExecutionIn(api.client, api.db, 'waiting');
    const res = await fetch(`${api.api.url}/api/v1/executions/${e.id}/stream`, { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await waitUntil(async () => (await streamsOpen(api, 'execution')) === 0, 'the HEAD request to hold no stream');
  });

  test('sends keep-alive comments while nothing changes; a client that hangs up frees its stream', async () => {
    const e = await createExecutionIn(api.client, api.db, 'waiting');
    const stream = await open(e.id);
    await stream.next();
    await waitUntil(() => stream.comments.filter((c) => c === 'keep-alive').length >= 3, 'three keep-alives', 5000);
    expect(stream.events).toHaveLength(1);
    expect(await streamsOpen(api, 'execution')).toBe(1);
    stream.close();
    await waitUntil(async () => (await streamsOpen(api, 'execution')) === 0, 'the stream to be released');
  });

  test('one completion statement for many streams costs one read for all of them, not one per stream', async () => {
    const task = uniqueTask('many');
    await registerTask(api.db, task);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push((await api.client.schedule(task)).execution_id);
    const claimed = await claimExecutions(api.db, [task], 100, 30000);
    const leases = claimed.map((c) => ({ id: c.execution.id, token: c.execution.leaseToken as string }));
    expect(leases).toHaveLength(20);
    const streams = await Promise.all(ids.map((id) => open(id)));
    await Promise.all(streams.map((s) => s.next()));
    let queries = 0;
    const count = () => void (queries += 1);
    api.db.on('query', count);
    try {
      await completeExecutions(api.db, leases.map((l) => ({ ...l, output: l.id })));
      const before = queries; // the completion's own statement
      const ends = await Promise.all(streams.map(async (s) => ((await s.next()).data.includes('"completed"') ? s.ended : false)));
      expect(ends.every(Boolean)).toBe(true);
      expect(queries - before).toBeLessThanOrEqual(1);
    } finally {
      api.db.off('query', count);
    }
  });

  test('close() ends open streams at once instead of waiting for them', async () => {
    const other = await startTestApi();
    try {
      const e = await createExecutionIn(other.client, other.db, 'waiting');
      const stream = await openEventStream(`${other.api.url}/api/v1/executions/${e.id}/stream`);
      await stream.next();
      const started = Date.now();
      await other.api.close();
      expect(Date.now() - started).toBeLessThan(2000);
      await expect(stream.ended).resolves.toBe(true);
      expect(stream.events).toHaveLength(1);
    } finally {
      await other.close();
    }
  });

  test('one state is serialized once for all the streams and long-polls that follow it', async () => {
    const { id, task, lease } = await createExecutionIn(api.client, api.db, 'running');
    const streams = await Promise.all(Array.from({ length: 25 }, () => open(id)));
    for (const s of streams) expect((await s.next()).event).toBe('execution');
    const polls = Array.from({ length: 25 }, () => api.call('GET', `/api/v1/executions/${id}/wait?timeout=30`));
    await waitUntil(async () => {
      const res = await api.call('GET', '/metrics');
      return Number(/^stepwise_http_long_polls_waiting (\d+)/m.exec(res.text)?.[1]) >= 25 ? true : undefined;
    }, 'the long-polls to park');
    const serialized = async () => Number(/^stepwise_http_states_serialized_total (\d+)/m.exec((await api.call('GET', '/metrics')).text)?.[1]);
    const before = await serialized();
    try {
      expect(await completeAs(api.db, lease as NonNullable<typeof lease>, { blob: 'x'.repeat(200_000), task })).toBe(true);
      const answers = await Promise.all(polls);
      expect(new Set(answers.map((a) => `${a.status} ${a.text}`)).size).toBe(1);
      expect(answers[0]).toMatchObject({ status: 200, body: { execution_id: id, status: 'completed' } });
      const finals = await Promise.all(streams.map((s) => s.next()));
      expect(new Set(finals.map((e) => `${e.id} ${e.data}`)).size).toBe(1);
      expect(JSON.parse(finals[0].data)).toEqual(answers[0].body);
      // One read offered to fifty followers: one serialization (a second read may race the first).
      expect((await serialized()) - before).toBeGreaterThanOrEqual(1);
      expect((await serialized()) - before).toBeLessThanOrEqual(2);
    } finally {
      for (const s of streams) s.close();
    }
  });
});

describe('with a real worker', () => {
  let api: TestApi;
  let worker: Worker;
  const gates = new Map<string, () => void>();
  const held = (name: string) => new Promise<void>((resolve) => gates.set(name, resolve));
  const task = defineTask({
    name: uniqueTask('stepper'),
    async run(ctx) {
      await ctx.step('one', () => 1);
      await ctx.step('two', () => held('two'));
      await ctx.sleep('nap', 50);
      return ctx.step('three', () => 3);
    },
  });
  beforeAll(async () => {
    api = await startTestApi({ http: { waitPollIntervalMs: 600000 } });
    worker = await startWorker(api.t, [task] as never);
  });
  afterAll(async () => {
    for (const release of gates.values()) release();
    await worker.stop();
    await api.close();
  });

  test("a worker's steps, the step in progress, its sleep and its end each show on the stream", async () => {
    const { execution_id: id } = await api.client.schedule(task.name);
    const stream = await openEventStream(`${api.api.url}/api/v1/executions/${id}/stream`);
    const seen: Array<Record<string, unknown> & { status: string; steps_completed: number }> = [];
    const until = async (what: string, check: (e: (typeof seen)[number]) => boolean) => {
      while (!seen.some(check)) seen.push(executionOf(await stream.next(15000)));
      return what;
    };
    await until('step one recorded, step two in progress', (e) => e.status === 'running' && e.steps_completed === 1 && e.current_step === 'two');
    gates.get('two')?.();
    await until('the sleep', (e) => e.status === 'waiting' && e.steps_completed === 2 && e.current_step === 'nap');
    await until('the end', (e) => e.status === 'completed');
    await expect(stream.ended).resolves.toBe(true);
    const steps = seen.map((e) => e.steps_completed);
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    expect(seen[seen.length - 1]).toMatchObject({ status: 'completed', steps_completed: 4, output: 3 });
  });
});

describe('progress is announced only while streams are open', () => {
  let api: TestApi;
  let worker: Worker;
  let listener: pg.Client;
  const heard: Array<{ channel: string; payload: string }> = [];
  const gates = new Map<string, () => void>();
  const held = (name: string) => new Promise<void>((resolve) => gates.set(name, resolve));
  const gated = (prefix: string) =>
    defineTask({
      name: uniqueTask(prefix),
      async run(ctx) {
        await ctx.step('one', () => 1);
        await ctx.step('gate one', () => held(`${ctx.executionId} one`));
        await ctx.step('two', () => 2);
        await ctx.step('gate two', () => held(`${ctx.executionId} two`));
        return 'done';
      },
    });
  const first = gated('gated');
  const progressOf = (id: string) => heard.filter((h) => h.channel === CHANNEL_PROGRESS && h.payload.split(',').includes(id));
  const streamsHeld = () => heard.filter((h) => h.channel === CHANNEL_STREAMS && h.payload === STREAMS_HELD);
  /** Reads the stream until `steps` steps are completed (only notifications move it: no fallback re-check). */
  const untilSteps = async (stream: OpenedStream, steps: number) => {
    let e = executionOf(await stream.next(15000));
    while (e.steps_completed < steps) e = executionOf(await stream.next(15000));
    return e;
  };
  beforeAll(async () => {
    // Neither a fallback re-check nor a periodic announcement within the tests: only what they test moves the streams.
    api = await startTestApi({ http: { waitPollIntervalMs: 600000 }, streamsAnnounceMs: 600000 });
    listener = new pg.Client({ connectionString: api.t.url });
    await listener.connect();
    listener.on('notification', (msg) => void heard.push({ channel: msg.channel, payload: msg.payload ?? '' }));
    await listener.query(`LISTEN ${CHANNEL_PROGRESS}; LISTEN ${CHANNEL_STREAMS}`);
    worker = await startWorker(api.t, [first] as never);
  });
  afterAll(async () => {
    for (const release of gates.values()) release();
    await worker.stop();
    await listener.end();
    await api.close();
  });

  test('a worker that heard of no stream announces no steps; a stream opening makes it announce its running executions, then each step', async () => {
    await waitUntil(() => heard.some((h) => h.channel === CHANNEL_STREAMS && h.payload === STREAMS_ASK), "the worker's question at start");
    const { execution_id: id } = await api.client.schedule(first.name);
    await waitUntil(() => gates.has(`${id} one`), 'step one recorded, the gate running');
    expect((await api.client.get(id)).steps_completed).toBe(1);
    await new Promise((r) => setTimeout(r, 100));
    expect(progressOf(id)).toEqual([]);
    expect(streamsHeld()).toEqual([]);

    const stream = await openEventStream(`${api.api.url}/api/v1/executions/${id}/stream`);
    expect(executionOf(await stream.next())).toMatchObject({ status: 'running', steps_completed: 1 });
    await waitUntil(() => progressOf(id).length === 1, 'the running execution announced once the worker heard of the stream');
    expect(streamsHeld()).toHaveLength(1);
    // A second stream within the interval says nothing new: workers are already announcing.
    const second = await openEventStream(`${api.api.url}/api/v1/executions/${id}/stream`);
    await second.next();
    await new Promise((r) => setTimeout(r, 100));
    expect(streamsHeld()).toHaveLength(1);
    second.close();

    gates.get(`${id} one`)?.();
    expect(await untilSteps(stream, 3)).toMatchObject({ status: 'running', steps_completed: 3 });
    expect(progressOf(id).length).toBeGreaterThanOrEqual(2);
    stream.close();
  });

  test('a worker started while a stream is open asks, is answered, and announces each step', async () => {
    const later = gated('later');
    await registerTask(api.db, later.name);
    const { execution_id: id } = await api.client.schedule(later.name);
    const stream = await openEventStream(`${api.api.url}/api/v1/executions/${id}/stream`);
    expect(executionOf(await stream.next())).toMatchObject({ status: 'pending' });
    const answersBefore = streamsHeld().length;
    const another = await startWorker(api.t, [later] as never);
    try {
      await waitUntil(() => streamsHeld().length > answersBefore, "the API server's answer");
      expect(await untilSteps(stream, 1)).toMatchObject({ status: 'running', steps_completed: 1 });
      gates.get(`${id} one`)?.();
      expect(await untilSteps(stream, 3)).toMatchObject({ status: 'running', steps_completed: 3 });
      expect(progressOf(id).length).toBeGreaterThanOrEqual(1);
    } finally {
      gates.get(`${id} two`)?.();
      stream.close();
      await another.stop();
    }
  });
});

describe('authentication', () => {
  test('a stream needs the bearer token like every API route: 401 without it', async () => {
    const api = await startTestApi({ tokens: ['stream-token'] });
    try {
      const e = await createExecutionIn(api.client, api.db, 'completed');
      for (const path of [`/api/v1/executions/${e.id}/stream`, '/api/v1/executions/changes']) {
        const refused = await api.call('GET', path);
        expect(refused.status).toBe(401);
        expect(refused.headers.get('www-authenticate')).toMatch(/^Bearer/);
      }
      const stream = await openEventStream(`${api.api.url}/api/v1/executions/${e.id}/stream`, { Authorization: 'Bearer stream-token' });
      expect(stream.response.status).toBe(200);
      await expect(stream.ended).resolves.toBe(true);
      expect(stream.events.map((x) => executionOf(x).status)).toEqual(['completed']);
    } finally {
      await api.close();
    }
  });
});

describe('GET /executions/changes', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi({ http: { streamKeepAliveMs: 100 } });
  });
  afterAll(async () => {
    await api.close();
  });

  test('sends sync first, then a changed event for every status change, filtered by task', async () => {
    const all = await openEventStream(`${api.api.url}/api/v1/executions/changes`);
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const filtered = await openEventStream(`${api.api.url}/api/v1/executions/changes?task=${encodeURIComponent(e.task)}`);
    const others = await openEventStream(`${api.api.url}/api/v1/executions/changes?task=nobody`);
    for (const s of [all, filtered, others]) expect((await s.next()).event).toBe('sync');
    await waitUntil(async () => (await streamsOpen(api, 'changes')) === 3, 'three changes streams');

    const lease = await claimExecution(api.db, e.task, e.id);
    for (const s of [all, filtered]) expect(await nextChange(s)).toEqual({ execution_id: e.id, task: e.task, status: 'running' });
    await completeAs(api.db, lease, null);
    for (const s of [all, filtered]) expect(await nextChange(s)).toEqual({ execution_id: e.id, task: e.task, status: 'completed' });
    await waitUntil(() => others.comments.length >= 2, 'keep-alives on the idle stream', 5000);
    expect(others.events.filter((x) => x.event !== 'sync')).toEqual([]);
    // A validation error is the JSON envelope, before any event.
    const bad = await api.call('GET', '/api/v1/executions/changes?task=');
    expect(bad.status).toBe(422);
    for (const s of [all, filtered, others]) s.close();
    await waitUntil(async () => (await streamsOpen(api, 'changes')) === 0, 'the changes streams to be released');
  });
});

describe('a PostgreSQL outage', () => {
  let t: TestDatabase;
  let proxy: TcpProxy;
  let proxied: Db;
  let api: TestApi;
  beforeAll(async () => {
    t = await createTestDatabase();
    const target = new URL(t.url);
    proxy = await createTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    await proxy.start();
    proxied = createDb({ url: proxy.urlThrough(t.url), acquireTimeoutMs: 1000 });
    // The fallback re-check is an hour away: only the re-established LISTEN connection can move the streams.
    api = await startTestApi({ db: { db: proxied, url: proxy.urlThrough(t.url) }, http: { waitPollIntervalMs: 3_600_000, streamKeepAliveMs: 100 } });
  });
  afterAll(async () => {
    await proxy.start();
    await api.close();
    await proxied.destroy();
    await proxy.stop();
    await t.drop();
  });

  test('streams stay open with keep-alives while the database is away, then send the state it reached meanwhile', async () => {
    const e = await createExecutionIn(api.client, t.db, 'running');
    const stream = await openEventStream(`${api.api.url}/api/v1/executions/${e.id}/stream`);
    const changes = await openEventStream(`${api.api.url}/api/v1/executions/changes`);
    expect(executionOf(await stream.next()).status).toBe('running');
    expect((await changes.next()).event).toBe('sync');

    await proxy.stop();
    const comments = stream.comments.length;
    // The execution ends while the server cannot hear it: its NOTIFY is lost for this server.
    await completeAs(t.db, e.lease!, 'during');
    await waitUntil(() => stream.comments.length >= comments + 3, 'keep-alives during the outage', 5000);
    expect(stream.events).toHaveLength(1);

    await proxy.start();
    expect(executionOf(await stream.next(15000))).toMatchObject({ status: 'completed', output: 'during' });
    await expect(stream.ended).resolves.toBe(true);
    // The changes stream cannot know what it missed: it says so.
    expect((await changes.next(15000)).event).toBe('sync');
    changes.close();
  });
});
