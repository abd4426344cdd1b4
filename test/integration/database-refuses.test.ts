// A database that refuses connections (as opposed to one whose socket is gone) is unavailable too:
// the API answers 503 with Retry-After for as long as it lasts, and recovers by itself.
import { defineTask, Type } from '../../src';
import type { Worker } from '../../src/engine/worker';
import { createDb } from '../../src/store/db';
import { classifyDbError, DatabaseUnavailableError, isDatabaseUnavailable } from '../../src/store/db-errors';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { createTestDatabase, withAdminClient, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

const JSON_HEADERS = { 'Content-Type': 'application/json' };
const echo = defineTask({ name: 'refuses-echo', data: Type.Object({ n: Type.Integer() }), run: async (ctx, data) => ctx.step('echo', () => data.n) });

let t: TestDatabase;
let api: TestApi;
let worker: Worker;
let name: string;

beforeAll(async () => {
  t = await createTestDatabase();
  name = new URL(t.url).pathname.slice(1);
  api = await startTestApi({ db: { db: t.db, url: t.url } });
  worker = await startWorker(t, [echo], { pollIntervalMs: 200 });
});
afterAll(async () => {
  await withAdminClient((c) => c.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`));
  await worker.stop();
  await api.close();
  await t.drop();
});

/** Refuses new connections to the test database and ends the ones it has (SQLSTATE 55000 on connect). */
async function refuseConnections(): Promise<void> {
  await withAdminClient(async (c) => {
    await c.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
    await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
  });
}

test('while the database refuses connections every API call is 503 with Retry-After; afterwards a new execution completes', async () => {
  const before = await api.client.schedule(echo.name, { n: 1 });
  expect((await api.client.wait(before.execution_id, { deadlineMs: 10_000 })).output).toBe(1);

  await refuseConnections();
  const answers = await Promise.all([
    api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: JSON.stringify({ task: echo.name, data: { n: 2 } }) }),
    api.call('GET', `/api/v1/executions/${before.execution_id}`),
    api.call('GET', '/api/v1/executions'),
    api.call('POST', `/api/v1/executions/${before.execution_id}/cancel`),
    api.call('GET', '/readyz'),
  ]);
  for (const res of answers) {
    expect({ path: res.path, status: res.status }).toEqual({ path: res.path, status: 503 });
    expect(res.body).toMatchObject({ error: { code: 'service_unavailable' } });
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  }
  expect((await api.call('GET', '/healthz')).status).toBe(200);

  await withAdminClient((c) => c.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`));
  const after = await waitUntil(async () => {
    const res = await api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body: JSON.stringify({ task: echo.name, data: { n: 3 } }) });
    return res.status === 201 ? (res.body as { execution_id: string }) : undefined;
  }, 'the API to schedule again');
  expect((await api.client.wait(after.execution_id, { deadlineMs: 20_000 })).output).toBe(3);
  expect((await api.call('GET', '/readyz')).status).toBe(200);
});

test('any failure to connect is unavailable, whatever its SQLSTATE: a database that does not exist (3D000)', async () => {
  const url = new URL(t.url);
  url.pathname = '/sw_no_such_database';
  const db = createDb({ url: url.toString(), acquireTimeoutMs: 2000 });
  try {
    const err = await db.raw('SELECT 1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DatabaseUnavailableError);
    expect(err).toMatchObject({ code: '3D000' });
  } finally {
    await db.destroy();
  }
});

test('the same SQLSTATE from a statement on a working connection is not unavailability', async () => {
  // 3D000 raised by a statement (not at connect) is a bug in the statement, not an outage.
  const err = await t.db.raw("DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = 'invalid_catalog_name'; END $$").catch((e: unknown) => e);
  expect(err).toMatchObject({ code: '3D000' });
  expect(isDatabaseUnavailable(err)).toBe(false);
  // The codes that mean the server will not serve this connection are unavailability wherever they arrive.
  const terminated = await t.db.raw("DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = 'admin_shutdown'; END $$").catch((e: unknown) => e);
  expect(isDatabaseUnavailable(terminated)).toBe(true);
});

test.each([
  ['08006', 'unavailable'],
  ['08P01', 'unavailable'],
  ['57P01', 'unavailable'],
  ['57P03', 'unavailable'],
  ['57P05', 'unavailable'],
  ['ECONNREFUSED', 'unavailable'],
  ['ECONNRESET', 'unavailable'],
  ['40P01', 'conflict'],
  ['40001', 'conflict'],
  ['23505', undefined],
  ['42P01', undefined],
])('SQLSTATE or socket code %s is classified as %s', (code, kind) => {
  expect(classifyDbError(Object.assign(new Error('x'), { code }))).toBe(kind);
});

test('a pool that gives no connection in time, and any wrapped connect failure, are unavailable', () => {
  expect(isDatabaseUnavailable(Object.assign(new Error('Knex: Timeout acquiring a connection'), { name: 'KnexTimeoutError' }))).toBe(true);
  expect(isDatabaseUnavailable(new DatabaseUnavailableError(new Error('no code at all')))).toBe(true);
  for (const code of ['55000', '3D000', '28000', '28P01', '53300']) {
    expect(isDatabaseUnavailable(new DatabaseUnavailableError(Object.assign(new Error('at connect'), { code })))).toBe(true);
  }
  expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(false);
});
