// A silent database (issue 42, row 1): a TCP proxy in front of PostgreSQL accepts connections but
// forwards nothing. Every request must still answer in bounded time (503 with Retry-After, from the
// configured timeouts), and nothing a request that answered 503 had sent may commit afterwards.
import { defineTask } from '../../src';
import { loadConfig, type Config } from '../../src/config';
import { createLogger } from '../../src/logger';
import { retryWhileUnavailable } from '../../src/engine/db-retry';
import { StoreUnavailableError } from '../../src/engine/errors';
import type { Worker } from '../../src/engine/worker';
import { createDb, dbOptionsOf, queryRows, type Db } from '../../src/store/db';
import { getExecution, insertExecutions } from '../../src/store/executions';
import { dbPoolStats } from '../../src/store/pool-guard';
import { loadSteps } from '../../src/store/steps';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { createTcpProxy, type TcpProxy } from '../helpers/tcp-proxy';
import { waitUntil } from '../helpers/wait-until';
import { quietLog, startWorker } from '../helpers/worker';

/** Small timeouts, so that a silent database is given up in about a second and a half. */
const DB_CONFIG: Partial<Config['db']> = { connectTimeoutMs: 1000, acquireTimeoutMs: 1000, statementTimeoutMs: 1000, idleInTransactionTimeoutMs: 1000, queryTimeoutMs: 1500 };

let t: TestDatabase;
let proxy: TcpProxy;
let proxiedUrl: string;
let proxiedDb: Db;
const config = loadConfig({ env: {}, overrides: Object.fromEntries(Object.entries(DB_CONFIG).map(([k, v]) => [`db.${k}`, v])) });

beforeAll(async () => {
  t = await createTestDatabase();
  const target = new URL(t.url);
  proxy = await createTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
  await proxy.start();
  proxiedUrl = proxy.urlThrough(t.url);
  proxiedDb = createDb({ ...dbOptionsOf(config, proxiedUrl), log: quietLog });
});
afterAll(async () => {
  proxy.forward();
  await proxiedDb.destroy();
  await proxy.stop();
  await t.drop();
});

/** Nothing sent through the proxy is still held or running: whatever was delivered late has run. */
async function settled(): Promise<void> {
  await waitUntil(() => proxy.held.bytes === 0, 'the proxy to deliver what it held');
  await waitUntil(async () => {
    const active = await queryRows<{ n: number }>(t.db, "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state <> 'idle' AND pid <> pg_backend_pid()");
    return active[0].n === 0;
  }, 'the database to run nothing');
}

describe('API server on a silent database', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi({ db: { db: proxiedDb, url: proxiedUrl }, dbConfig: DB_CONFIG });
  });
  afterAll(async () => {
    proxy.forward();
    await api.close();
  });
  afterEach(() => proxy.forward());

  test('schedule, read, list and cancel answer 503 with Retry-After; the schedule and cancel never land later', async () => {
    const task = uniqueTask('silent');
    await registerTask(t.db, task);
    const { execution_id: id } = await api.client.schedule(task, {});
    // Warm connections in the pool: the silence meets statements on open connections, not connects.
    await Promise.all([api.call('GET', `/api/v1/executions/${id}`), api.call('GET', `/api/v1/executions?task=${task}`)]);

    proxy.silence();
    const answers = {
      schedule: await api.call('POST', '/api/v1/executions', { body: JSON.stringify({ task, data: {} }), headers: { 'content-type': 'application/json' } }),
      get: await api.call('GET', `/api/v1/executions/${id}`),
      list: await api.call('GET', `/api/v1/executions?task=${task}`),
      cancel: await api.call('POST', `/api/v1/executions/${id}/cancel`),
    };
    for (const [operation, answer] of Object.entries(answers)) {
      expect({ operation, status: answer.status, body: answer.body }).toEqual({
        operation,
        status: 503,
        body: { error: { code: 'service_unavailable', message: expect.any(String), reason: 'database_unavailable' } },
      });
      expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
    }

    proxy.forward();
    await waitUntil(async () => (await api.call('GET', `/api/v1/executions/${id}`)).status === 200, 'the server to recover');
    await settled();
    const rows = await queryRows<{ id: string; status: string }>(t.db, 'SELECT id, status FROM stepwise.executions WHERE task = ?', [task]);
    expect(rows).toEqual([{ id, status: 'pending' }]);
  });

  test('a statement that waits on a lock is cancelled by statement_timeout: 503, and it does not land once the lock is free', async () => {
    const task = uniqueTask('locked');
    await registerTask(t.db, task);
    const { execution_id: id } = await api.client.schedule(task, {});
    await t.db.transaction(async (trx) => {
      await trx.raw('SELECT id FROM stepwise.executions WHERE id = ? FOR UPDATE', [id]);
      const answer = await api.call('POST', `/api/v1/executions/${id}/cancel`);
      expect(answer.status).toBe(503);
      expect(answer.body).toMatchObject({ error: { code: 'service_unavailable', reason: 'database_unavailable' } });
      expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
    });
    await settled();
    expect((await getExecution(t.db, id))?.status).toBe('pending');
  });
});

describe('worker on a silent database', () => {
  let worker: Worker | undefined;
  afterEach(async () => {
    proxy.forward();
    await worker?.stop();
    worker = undefined;
  });

  test('a store call on a silent database is unavailable: retried writes give up at their deadline instead of hanging', async () => {
    const [{ execution }] = await insertExecutions(t.db, [{ task: uniqueTask('silent-store'), data: null }]);
    expect((await getExecution(proxiedDb, execution.id))?.id).toBe(execution.id);
    proxy.silence();
    await expect(retryWhileUnavailable(() => getExecution(proxiedDb, execution.id), Date.now() + 500)).rejects.toBeInstanceOf(StoreUnavailableError);
  });

  test('a completion written while the database is silent is retried and lands once it answers; the step ran once', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let runs = 0;
    const task = defineTask({ name: uniqueTask('silent-complete'), async run(ctx) {
      await ctx.step('side-effect', () => void (runs += 1));
      await gate;
      return 'done';
    } });
    worker = await startWorker(t, [task], { db: proxiedDb, databaseUrl: proxiedUrl, leaseMs: 30000, log: createLogger({ level: 'silent' }) });
    const [{ execution }] = await insertExecutions(t.db, [{ task: task.name, data: null }]);
    await waitUntil(async () => runs === 1 && (await loadSteps(t.db, execution.id)).some((s) => s.completed), 'the step to be recorded');
    proxy.silence();
    const closed = dbPoolStats(proxiedDb)?.silentClosures ?? 0;
    release(); // the completion meets the silence: its statement is given up, its connection closed
    await waitUntil(() => (dbPoolStats(proxiedDb)?.silentClosures ?? 0) > closed, 'the silent statements to be given up');
    expect((await getExecution(t.db, execution.id))?.status).toBe('running');
    proxy.forward();
    const done = await waitUntil(async () => {
      const e = await getExecution(t.db, execution.id);
      return e?.status === 'completed' ? e : undefined;
    }, 'the completion to land');
    expect(done.output).toBe('done');
    expect(done.attempt).toBe(1);
    expect(runs).toBe(1);
  });
});
