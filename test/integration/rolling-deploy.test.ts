// A rolling deploy with two worker processes of different task versions (PRODUCT.md §9): executions
// started on version 1 finish on version 1's process, new ones start on version 2's, none fails,
// although version 2's handler cannot replay a version-1 history.
import { queryRows } from '../../src/store/db';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { spawnTsx, type TestProcess } from '../helpers/processes';
import { waitUntil } from '../helpers/wait-until';

const FIXTURE = 'test/fixtures/deploy-tasks.ts';
const TASK = 'rolling.order';

let api: TestApi;
const processes: TestProcess[] = [];

beforeAll(async () => {
  api = await startTestApi();
});

afterAll(async () => {
  await Promise.all(processes.map((p) => stop(p)));
  await api.close();
});

/** SIGTERM (a graceful stop), SIGKILL after 5 s: no process outlives the test. */
async function stop(p: TestProcess): Promise<void> {
  const timer = setTimeout(() => p.child.kill('SIGKILL'), 5000);
  p.child.kill('SIGTERM');
  await p.exited;
  clearTimeout(timer);
}

async function workerOf(version: string): Promise<TestProcess> {
  const env = { DATABASE_URL: api.t.url, STEPWISE_TEST_VERSION: version, STEPWISE_LEASE_MS: '10000' };
  const p = await spawnTsx('test/fixtures/worker-process.ts', [FIXTURE], env, 'ready', 45_000);
  processes.push(p);
  return p;
}

async function allIn(ids: string[], status: string): Promise<void> {
  await waitUntil(async () => {
    const rows = await queryRows<{ n: number }>(api.db, 'SELECT count(*)::int AS n FROM stepwise.executions WHERE id = ANY(?::uuid[]) AND status = ?', [ids, status]);
    return rows[0].n === ids.length;
  }, `${ids.length} executions ${status}`, 30_000);
}

test('old executions finish on the old version, new ones start on the new, none fails', async () => {
  const v1 = await workerOf('1');
  const old = await Promise.all(Array.from({ length: 12 }, (_, i) => api.client.schedule(TASK, { n: i })));
  const oldIds = old.map((e) => e.execution_id);
  await allIn(oldIds, 'waiting');

  // Version 2 starts while version 1 still runs: from its registration on, new executions are its.
  const v2 = await workerOf('2');
  await waitUntil(async () => (await api.client.listTasks()).find((t) => t.name === TASK)?.versions.find((v) => v.version === '2')?.current === true, 'version 2 to be current');
  const fresh = await Promise.all(Array.from({ length: 12 }, (_, i) => api.client.schedule(TASK, { n: 100 + i })));
  const freshIds = fresh.map((e) => e.execution_id);
  await allIn(freshIds, 'completed');

  const versions = (await api.client.listTasks()).find((t) => t.name === TASK)?.versions;
  expect(versions).toEqual([
    { version: '2', current: true, workers: 1, pending: 0, running: 0, waiting: 0 },
    { version: '1', current: false, workers: 1, pending: 0, running: 0, waiting: 12 },
  ]);

  // The old ones resume on version 1's process, pinned: version 2's would fail them.
  for (const id of oldIds) await api.client.sendEvent(id, 'go');
  await allIn(oldIds, 'completed');
  for (const id of oldIds) {
    const e = await api.client.get(id);
    expect({ version: e.task_version, output: e.output }).toEqual({ version: '1', output: { version: '1', pid: v1.child.pid } });
  }
  for (const id of freshIds) {
    const e = await api.client.get(id);
    expect({ version: e.task_version, output: e.output }).toEqual({ version: '2', output: { version: '2', pid: v2.child.pid } });
  }

  // Nothing left on version 1: the operator sees it may go.
  expect((await api.client.listTasks()).find((t) => t.name === TASK)?.versions.find((v) => v.version === '1')).toMatchObject({ pending: 0, running: 0, waiting: 0 });
  await stop(v1);
  processes.splice(processes.indexOf(v1), 1);
  const [failed] = await queryRows<{ n: number }>(api.db, "SELECT count(*)::int AS n FROM stepwise.executions WHERE task = ? AND status <> 'completed'", [TASK]);
  expect(failed.n).toBe(0);
}, 120_000);
