// Behind PgBouncer in transaction mode (db.pooler 'transaction'): the API's and the worker's pools go
// through a real pgbouncer with fewer server connections than clients, so that consecutive
// transactions of one client connection land on different server connections; LISTEN goes to the
// database directly (the URL the API and the worker are given for it). Nothing may rely on a session:
// no named prepared statement, no SQL PREPARE, no session setting or lock. Without db.pooler the
// claims fail here with `prepared statement "stepwise_claim_..." already exists` (or `does not exist`)
// and requests answer 500.
import { defineTask, Type } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { createDb, queryRows, type Db } from '../../src/store/db';
import { isMigrated, migrateLatest } from '../../src/store/migrate';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { createTestDatabase, withAdminClient, type TestDatabase } from '../helpers/db';
import { findPgBouncer, startPgBouncer, type TestPgBouncer } from '../helpers/pgbouncer';
import { uniqueTask } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

const binary = findPgBouncer();
if (!binary) {
  console.warn('pgbouncer is not installed: skipping test/integration/pgbouncer.test.ts (run scripts/install-pgbouncer.sh, or `make test`, which does)');
}
const describeWithPgBouncer = binary ? describe : describe.skip;

/** Server connections: far fewer than the pools' clients, so transactions interleave on them. */
const SERVER_CONNECTIONS = 4;
const EXECUTIONS = 8;

/** Tracks how many handlers run at once, overall and per key. */
class Overlap {
  private readonly now = new Map<string, number>();
  readonly max = new Map<string, number>();
  async around<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const n = (this.now.get(key) ?? 0) + 1;
    this.now.set(key, n);
    this.max.set(key, Math.max(this.max.get(key) ?? 0, n));
    try {
      return await fn();
    } finally {
      this.now.set(key, (this.now.get(key) ?? 1) - 1);
    }
  }
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

const orderName = uniqueTask('pooled-order');
const order = defineTask({
  name: orderName,
  data: Type.Object({ n: Type.Integer() }),
  events: { go: Type.Object({ add: Type.Integer() }) },
  async run(ctx, data) {
    const a = await ctx.step('a', () => data.n * 10);
    const b = await ctx.step('b', async () => (await pause(5), a + 1));
    const go = await ctx.waitForEvent('go', { timeout: '1m' });
    return ctx.step('c', () => ({ total: b + go.add }));
  },
});

const limitedOverlap = new Overlap();
const limitedName = uniqueTask('pooled-limited');
const limited = defineTask({
  name: limitedName,
  data: Type.Object({ n: Type.Integer() }),
  concurrency: { limit: 2 },
  async run(ctx, data) {
    return limitedOverlap.around('all', async () => ctx.step('work', async () => (await pause(30), data.n)));
  },
});

const keyedOverlap = new Overlap();
const keyedName = uniqueTask('pooled-keyed');
const keyed = defineTask({
  name: keyedName,
  data: Type.Object({ tenant: Type.String(), n: Type.Integer() }),
  concurrency: { limit: 1, key: '/tenant' },
  rateLimit: { limit: 100, period: '1m' },
  async run(ctx, data) {
    return keyedOverlap.around(data.tenant, async () => ctx.step('work', async () => (await pause(20), data.n)));
  },
});

describeWithPgBouncer('behind PgBouncer in transaction mode', () => {
  let t: TestDatabase;
  let bouncer: TestPgBouncer;
  let apiDb: Db;
  let workerDb: Db;
  let api: TestApi;
  let worker: Worker;

  beforeAll(async () => {
    t = await createTestDatabase();
    bouncer = await startPgBouncer(binary as string, { serverUrl: t.url, poolSize: SERVER_CONNECTIONS });
    const pooledUrl = bouncer.pooledUrl(t.url);
    apiDb = createDb({ url: pooledUrl, poolMax: 6, pooler: 'transaction' });
    workerDb = createDb({ url: pooledUrl, poolMax: 6, pooler: 'transaction' });
    // The URL each is given besides its pool is the one it LISTENs on: the database's own.
    api = await startTestApi({ db: { db: apiDb, url: t.url }, http: { waitPollIntervalMs: 1000 } });
    worker = await startWorker({ ...t, db: workerDb }, [order, limited, keyed] as never, { concurrency: 8, keepSuspended: 0 });
  }, 60_000);

  afterAll(async () => {
    await worker?.stop();
    await api?.close();
    await apiDb?.destroy();
    await workerDb?.destroy();
    await bouncer?.stop();
    await t?.drop();
  }, 30_000);

  test('the pools really go through pgbouncer, more clients than server connections', async () => {
    expect(new URL(bouncer.pooledUrl(t.url)).port).not.toBe(new URL(t.url).port);
    // Both pools' twelve clients at once, each holding its server connection for a moment.
    const pids = await Promise.all([apiDb, workerDb].flatMap((db) => Array.from({ length: 12 }, () => queryRows<{ pid: number }>(db, 'SELECT pg_backend_pid() AS pid, pg_sleep(0.02)'))));
    expect(new Set(pids.map(([r]) => r.pid)).size).toBeLessThanOrEqual(SERVER_CONNECTIONS);
  });

  test('migrations run through the pooler: each takes a transaction, nothing more', async () => {
    const name = `sw_test_pooled_${Date.now().toString(36)}`;
    await withAdminClient((c) => c.query(`CREATE DATABASE ${name}`));
    const direct = new URL(t.url);
    direct.pathname = `/${name}`;
    const db = createDb({ url: bouncer.pooledUrl(direct.toString()), poolMax: 2, pooler: 'transaction' });
    try {
      expect((await migrateLatest(db)).length).toBeGreaterThan(0);
      expect(await isMigrated(db)).toBe(true);
    } finally {
      await db.destroy();
      await withAdminClient((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    }
  }, 60_000);

  test('schedule, steps, an event, a long-poll wait and a cancel, with executions interleaved', async () => {
    const scheduled = await Promise.all(Array.from({ length: EXECUTIONS + 1 }, (_, n) => api.client.schedule(orderName, { n })));
    const [toCancel, ...toFinish] = scheduled;
    await waitUntil(async () => {
      const all = await Promise.all(scheduled.map((s) => api.client.get(s.execution_id)));
      return all.every((e) => e.status === 'waiting');
    }, 'every execution to wait for its event', 30_000, 100);

    // Long-polls first, answered by the completions the events bring (through the direct LISTEN).
    const waits = toFinish.map((s) => api.client.wait(s.execution_id, { timeoutSeconds: 20 }));
    const cancelled = api.client.wait(toCancel.execution_id, { timeoutSeconds: 20 });
    await Promise.all(toFinish.map((s, i) => api.client.sendEvent(s.execution_id, 'go', { add: i })));
    expect(await api.client.cancel(toCancel.execution_id)).toEqual({ execution_id: toCancel.execution_id, status: 'cancelled' });

    const finished = await Promise.all(waits);
    finished.forEach((e, i) => expect(e).toMatchObject({ status: 'completed', output: { total: (i + 1) * 10 + 1 + i } }));
    expect((await cancelled).status).toBe('cancelled');
    const steps = await api.client.listSteps(toFinish[0].execution_id);
    expect(steps.map((s) => s.name)).toEqual(['a', 'b', 'go', 'c']);
  }, 60_000);

  test('a concurrency limit holds through the throttled claim', async () => {
    const scheduled = await Promise.all(Array.from({ length: EXECUTIONS }, (_, n) => api.client.schedule(limitedName, { n })));
    const done = await Promise.all(scheduled.map((s) => api.client.wait(s.execution_id, { timeoutSeconds: 20 })));
    expect(done.map((e) => e.status)).toEqual(scheduled.map(() => 'completed'));
    expect(limitedOverlap.max.get('all')).toBeLessThanOrEqual(2);
  }, 60_000);

  test('a keyed concurrency limit holds per key, under a rate limit', async () => {
    const tenants = ['a', 'b', 'c'];
    const scheduled = await Promise.all(Array.from({ length: EXECUTIONS }, (_, n) => api.client.schedule(keyedName, { tenant: tenants[n % 3], n })));
    const done = await Promise.all(scheduled.map((s) => api.client.wait(s.execution_id, { timeoutSeconds: 20 })));
    expect(done.map((e) => e.status)).toEqual(scheduled.map(() => 'completed'));
    for (const tenant of tenants) expect(keyedOverlap.max.get(tenant)).toBe(1);
  }, 60_000);
});
