// Database outages (issue 5, item 2): the worker and the API server go through PostgreSQL being away
// (a TCP proxy switched off cuts every connection and refuses new ones) and recover with no restart.
import { defineTask, Type } from '../../src';
import { getExecution } from '../../src/store/executions';
import { loadSteps } from '../../src/store/steps';
import { claimExecutions } from '../../src/store/transitions/claim';
import { completeExecutions } from '../../src/store/transitions/complete';
import { createDb, type Db } from '../../src/store/db';
import { createLogger } from '../../src/logger';
import { NotificationListener } from '../../src/store/listener';
import type { Worker } from '../../src/engine/worker';
import { LogCapture, startTestApi, type TestApi } from '../helpers/api-server';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { createTcpProxy, type TcpProxy } from '../helpers/tcp-proxy';
import { waitUntil } from '../helpers/wait-until';
import { quietLog, startWorker } from '../helpers/worker';
import { insertExecutions } from '../../src/store/executions';
import { RetentionSweeper } from '../../src/engine/retention';
import { CronFirer, cronKey } from '../../src/engine/cron';
import { nextFireAfter } from '../../src/domain/cron';
import { queryRows } from '../../src/store/db';

let t: TestDatabase;
let proxy: TcpProxy;
let proxiedUrl: string;
let proxiedDb: Db;

beforeAll(async () => {
  t = await createTestDatabase();
  const target = new URL(t.url);
  proxy = await createTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
  await proxy.start();
  proxiedUrl = proxy.urlThrough(t.url);
  proxiedDb = createDb({ url: proxiedUrl, acquireTimeoutMs: 1000 });
});
afterAll(async () => {
  await proxy.start();
  await proxiedDb.destroy();
  await proxy.stop();
  await t.drop();
});

const lines = (logs: LogCapture, msg: string) => logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === msg);

describe('worker', () => {
  let worker: Worker | undefined;
  afterEach(async () => {
    await proxy.start();
    await worker?.stop();
    worker = undefined;
  });

  test('claims back off with jitter while the database is down, then resume without a restart', async () => {
    const ran: string[] = [];
    const task = defineTask({ name: uniqueTask('outage'), data: Type.Object({ k: Type.String() }), async run(ctx, data) {
      await ctx.step('one', () => void ran.push(data.k));
      return { k: data.k };
    } });
    const logs = new LogCapture();
    worker = await startWorker(t, [task], { db: proxiedDb, databaseUrl: proxiedUrl, log: createLogger({ level: 'debug', destination: logs }), pollIntervalMs: 100 });
    await proxy.stop();
    const downSince = Date.now();
    const scheduled = await insertExecutions(t.db, ['a', 'b', 'c'].map((k) => ({ task: task.name, data: { k } })));
    await waitUntil(() => lines(logs, 'claim failed').length >= 4, 'claims to fail');
    await new Promise((r) => setTimeout(r, 2500 - (Date.now() - downSince)));
    const failed = lines(logs, 'claim failed');
    // Exponential: 100, 200, 400, 800, ... ms (each jittered to half-to-full), so a 2.5 s outage costs a handful of tries, not 25.
    expect(failed.length).toBeLessThanOrEqual(8);
    const backoffs = failed.map((l) => l.backoffMs as number);
    expect(backoffs).toEqual([...backoffs].sort((a, b) => a - b));
    expect(backoffs[backoffs.length - 1]).toBeGreaterThan(backoffs[0]);
    await proxy.start();
    for (const s of scheduled) {
      await waitUntil(async () => (await getExecution(t.db, s.execution.id))?.status === 'completed', 'the execution to complete after the outage', 20000);
    }
    expect(ran.sort()).toEqual(['a', 'b', 'c']);
  });

  test('a completion that fails during a short outage is retried and lands: one attempt, steps run once', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let runs = 0;
    const task = defineTask({ name: uniqueTask('complete-outage'), async run(ctx) {
      await ctx.step('side-effect', () => void (runs += 1));
      await gate;
      return 'done';
    } });
    worker = await startWorker(t, [task], { db: proxiedDb, databaseUrl: proxiedUrl, leaseMs: 8000 });
    const [{ execution }] = await insertExecutions(t.db, [{ task: task.name, data: null }]);
    // The step has run and its record committed (the handler now waits at the gate).
    await waitUntil(async () => runs === 1 && (await loadSteps(t.db, execution.id)).some((s) => s.completed), 'the step to be recorded');
    await proxy.stop();
    release(); // the handler returns while the database is away: its completion write fails
    await new Promise((r) => setTimeout(r, 1500));
    expect((await getExecution(t.db, execution.id))?.status).toBe('running');
    await proxy.start();
    const done = await waitUntil(async () => {
      const e = await getExecution(t.db, execution.id);
      return e?.status === 'completed' ? e : undefined;
    }, 'the completion to land after the outage');
    expect(done.output).toBe('done');
    expect(done.attempt).toBe(1);
    expect(runs).toBe(1);
  });

  test('an outage longer than the lease abandons the attempt without failing it; the execution is taken over and completes', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let runs = 0;
    const task = defineTask({ name: uniqueTask('long-outage'), retry: { maxAttempts: 1 }, async run(ctx) {
      await ctx.step('side-effect', () => void (runs += 1));
      if (ctx.attempt === 1) await gate;
      return `attempt ${ctx.attempt}`;
    } });
    worker = await startWorker(t, [task], { db: proxiedDb, databaseUrl: proxiedUrl, leaseMs: 1500, pollIntervalMs: 100 });
    const [{ execution }] = await insertExecutions(t.db, [{ task: task.name, data: null }]);
    // The step has run and its record committed (the handler now waits at the gate).
    await waitUntil(async () => runs === 1 && (await loadSteps(t.db, execution.id)).some((s) => s.completed), 'the step to be recorded');
    await proxy.stop();
    release();
    await new Promise((r) => setTimeout(r, 2500)); // past the lease: the completion gives up
    await proxy.start();
    const done = await waitUntil(async () => {
      const e = await getExecution(t.db, execution.id);
      return e && ['completed', 'failed'].includes(e.status) ? e : undefined;
    }, 'the execution to end', 20000);
    // maxAttempts is 1: had the outage been recorded as a failed attempt, the execution would be failed.
    expect(done.status).toBe('completed');
    expect(done.output).toBe('attempt 2');
    expect(runs).toBe(1); // the takeover replayed the recorded step
  });
});

describe('LISTEN connection', () => {
  test('reconnects with exponential backoff and jitter, and emits connected again', async () => {
    const logs = new LogCapture();
    const listener = new NotificationListener({ url: proxiedUrl, channels: ['stepwise_test_outage'], log: createLogger({ level: 'debug', destination: logs }) });
    await listener.start();
    let reconnects = 0;
    listener.on('connected', () => (reconnects += 1));
    try {
      await proxy.stop();
      await waitUntil(() => !listener.isConnected, 'the loss to be noticed');
      await new Promise((r) => setTimeout(r, 2500));
      const tries = lines(logs, 'listen reconnect failed').length;
      expect(tries).toBeGreaterThanOrEqual(2);
      expect(tries).toBeLessThanOrEqual(8);
      await proxy.start();
      await waitUntil(() => listener.isConnected && reconnects === 1, 'the listener to reconnect', 10000);
    } finally {
      await listener.stop();
    }
  });
});

describe('API server', () => {
  let api: TestApi;
  beforeAll(async () => {
    // The fallback re-check is an hour away: only the LISTEN connection can wake these long-polls.
    api = await startTestApi({ db: { db: proxiedDb, url: proxiedUrl }, http: { waitPollIntervalMs: 3_600_000 } });
  });
  afterAll(async () => {
    await proxy.start();
    await api.close();
  });

  test('long-polls open across an outage are woken after it, and the re-established LISTEN wakes new ones', async () => {
    const task = uniqueTask('api-outage');
    await registerTask(t.db, task);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await api.client.schedule(task)).execution_id);
    const claimed = await claimExecutions(t.db, [task], 10, 60000);
    const leases = ids.map((id) => {
      const c = claimed.find((x) => x.execution.id === id);
      if (!c) throw new Error(`could not claim ${id}`);
      return { id, token: c.execution.leaseToken as string };
    });
    const polls = ids.map((id) => fetch(`${api.api.url}/api/v1/executions/${id}/wait?timeout=60`));
    await waitUntil(async () => (await fetch(`${api.api.url}/metrics`).then((r) => r.text())).includes('stepwise_http_long_polls_waiting 3'), 'the long-polls to be open');
    // A waiter is registered just before its first read of the execution; let those reads finish.
    await new Promise((r) => setTimeout(r, 500));

    await proxy.stop();
    const during = await api.call('GET', `/api/v1/executions/${ids[0]}`);
    expect(during.status).toBe(503);
    expect(during.headers.get('retry-after')).toBeTruthy();
    expect((await api.call('GET', '/readyz')).status).toBe(503);
    expect((await api.call('GET', '/healthz')).status).toBe(200);
    // The executions end while the server cannot hear it (their NOTIFY is lost for it).
    await completeExecutions(t.db, leases.slice(0, 2).map((l) => ({ ...l, output: 'during' })));
    await proxy.start();
    const answered = await Promise.all(polls.slice(0, 2).map((p) => p.then((r) => r.status)));
    expect(answered).toEqual([200, 200]);
    expect((await api.call('GET', '/readyz')).status).toBe(200);

    // The third was open across the outage too; it ends now, and only a NOTIFY can tell the server.
    const started = Date.now();
    await completeExecutions(t.db, [{ ...leases[2], output: 'after' }]);
    expect((await polls[2]).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(5000);
  });
});

describe('retention sweeper', () => {
  test('a sweep that meets the database down logs a warning and deletes nothing; the next sweep, with the database back, deletes', async () => {
    const task = uniqueTask('outage-retention');
    const [{ execution }] = await insertExecutions(t.db, [{ task, data: null }]);
    await queryRows(t.db, "UPDATE stepwise.executions SET status = 'completed', created_at = now() - interval '3 days', completed_at = now() - interval '3 days', due_at = NULL WHERE id = ?", [execution.id]);
    const logs = new LogCapture();
    const deleted: number[] = [];
    const sweeper = new RetentionSweeper({ db: proxiedDb, log: createLogger({ level: 'debug', destination: logs }), keepFinishedMs: 86_400_000, intervalMs: 100, onDeleted: (n) => deleted.push(n) });
    await proxy.stop();
    try {
      expect(await sweeper.sweep()).toBe(0);
      expect(lines(logs, 'retention sweep failed; the next one will try again')).toEqual([expect.objectContaining({ level: 40, deleted: 0 })]);
      expect(await getExecution(t.db, execution.id)).toBeDefined();
      await proxy.start();
      sweeper.start();
      await waitUntil(async () => (await getExecution(t.db, execution.id)) === undefined, 'the next sweep to delete it', 10000);
      // onDeleted runs once the sweep's statement has returned, a moment after the row is gone.
      await waitUntil(() => deleted.length > 0, 'the sweep to report its deletion', 5000);
      expect(deleted).toEqual([1]);
    } finally {
      await proxy.start();
      await sweeper.stop();
    }
  });
});

describe('cron', () => {
  test('a fire time that meets the database down is scheduled once it is back, before the next one', async () => {
    const task = uniqueTask('cron-outage');
    const schedule = { pattern: '*/5 * * * * *', timezone: 'UTC', data: null };
    const fired: Array<{ at: Date; created: boolean }> = [];
    const firer = new CronFirer({ db: proxiedDb, log: quietLog, schedules: [{ task, schedule }], onFired: (_, at, created) => fired.push({ at, created }) });
    await proxy.stop();
    // The first fire time the firer will meet, from the moment it starts (not before the proxy
    // stopped: on a loaded machine that can take long enough to pass a fire time).
    const fireAt = nextFireAfter(schedule, new Date()) as Date;
    firer.start();
    try {
      await new Promise((r) => setTimeout(r, Math.max(0, fireAt.getTime() - Date.now()) + 1000));
      expect(fired).toEqual([]);
      await proxy.start();
      await waitUntil(() => fired.length > 0, 'the fire to land', 10_000);
      expect(fired[0]).toEqual({ at: fireAt, created: true });
      const rows = await queryRows<{ start_at: Date }>(t.db, 'SELECT start_at FROM stepwise.executions WHERE idempotency_key = ?', [cronKey(task, fireAt)]);
      expect(rows).toEqual([{ start_at: fireAt }]);
    } finally {
      await proxy.start();
      await firer.stop();
    }
  });
});
