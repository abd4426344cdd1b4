// A saturated pool (issue 42, row 2): every database connection of the server in use while the
// database is healthy is the server being busy, not the database being away, and says so.
import { createDb, type Db } from '../../src/store/db';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { quietLog } from '../helpers/worker';

interface PoolClient {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<void>;
}

let t: TestDatabase;
let db: Db;
let api: TestApi;

beforeAll(async () => {
  t = await createTestDatabase();
  db = createDb({ url: t.url, poolMax: 2, acquireTimeoutMs: 300, log: quietLog });
  api = await startTestApi({ db: { db, url: t.url } });
});
afterAll(async () => {
  await api.close();
  await db.destroy();
  await t.drop();
});

const refusals = async (reason: string) => {
  const text = await (await fetch(`${api.api.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`stepwise_http_requests_refused_total{reason="${reason}"}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
};

test('with every pool connection in use and the database answering, a request gets 503 pool_saturated with Retry-After, counted in a metric', async () => {
  const task = uniqueTask('busy');
  await registerTask(t.db, task);
  const { execution_id: id } = await api.client.schedule(task, {});
  const before = await refusals('pool_saturated');
  const client = db.client as PoolClient;
  const held = [await client.acquireConnection(), await client.acquireConnection()];
  try {
    const answer = await api.call('GET', `/api/v1/executions/${id}`);
    expect(answer.status).toBe(503);
    expect(answer.body).toEqual({ error: { code: 'service_unavailable', message: expect.stringContaining('busy'), reason: 'pool_saturated' } });
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
  } finally {
    for (const connection of held) await client.releaseConnection(connection);
  }
  expect((await api.call('GET', `/api/v1/executions/${id}`)).status).toBe(200);
  expect(await refusals('pool_saturated')).toBe(before + 1);
  expect(await refusals('database_unavailable')).toBe(0);
});
