import { FinishedCounts } from '../../src/api/finished-counts';
import { queryRows } from '../../src/store/db';
import { countFinishedExecutions, type StatusCount } from '../../src/store/tasks';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { insertExecutions } from '../../src/store/executions';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { quietLog } from '../helpers/worker';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

/** An execution of `task` put straight into `status`. */
async function executionIn(task: string, status: string): Promise<string> {
  const [{ execution }] = await insertExecutions(api.db, [{ task, data: null }]);
  const finished = ['completed', 'failed', 'cancelled'].includes(status);
  await queryRows(api.db, `UPDATE stepwise.executions SET status = ?, completed_at = ${finished ? 'now()' : 'NULL'}, due_at = ${finished ? 'NULL' : 'due_at'} WHERE id = ?`, [status, execution.id]);
  return execution.id;
}

const countOf = (counts: StatusCount[], task: string, status: string) => counts.find((c) => c.task === task && c.status === status)?.count ?? 0;

/** Counts of the real database, read through a loader that counts its reads and can take (fake) time. */
function countsOverDb(clock: { now: number }, takesMs = 0) {
  const loader = {
    reads: 0,
    load: async () => {
      loader.reads += 1;
      const counts = await countFinishedExecutions(api.db);
      clock.now += takesMs;
      return counts;
    },
  };
  return loader;
}

describe('finished counts of GET /tasks', () => {
  test('countFinishedExecutions counts completed, failed and cancelled executions only, by task', async () => {
    const task = uniqueTask('finished');
    await registerTask(api.db, task);
    for (const status of ['completed', 'completed', 'failed', 'cancelled', 'pending', 'running', 'waiting']) await executionIn(task, status);
    const counts = (await countFinishedExecutions(api.db)).filter((c) => c.task === task);
    expect(counts.sort((a, b) => a.status.localeCompare(b.status))).toEqual([
      { task, status: 'cancelled', count: 1 },
      { task, status: 'completed', count: 2 },
      { task, status: 'failed', count: 1 },
    ]);
  });

  test('while counting is cheap, every request counts for itself, exactly', async () => {
    const task = uniqueTask('cheap');
    const clock = { now: 1_000_000 };
    const loader = countsOverDb(clock, 10);
    const counts = new FinishedCounts({ load: loader.load, log: quietLog, exactBelowMs: 50, now: () => clock.now });
    expect(countOf(await counts.get(), task, 'failed')).toBe(0);
    await executionIn(task, 'failed');
    expect(countOf(await counts.get(), task, 'failed')).toBe(1);
    await Promise.all([counts.get(), counts.get()]);
    expect(loader.reads).toBe(4);
  });

  test('once counting is slow, requests get the last count at once, and one that finds it old starts one recount in the background', async () => {
    const task = uniqueTask('recount');
    await executionIn(task, 'completed');
    const clock = { now: 2_000_000 };
    const loader = countsOverDb(clock, 60);
    const counts = new FinishedCounts({ load: loader.load, log: quietLog, exactBelowMs: 50, minAgeMs: 2000, costFactor: 20, now: () => clock.now });

    // The first request has nothing to reuse: it waits.
    expect(countOf(await counts.get(), task, 'completed')).toBe(1);
    expect(loader.reads).toBe(1);

    await executionIn(task, 'completed');
    clock.now += 1999;
    expect(countOf(await counts.get(), task, 'completed')).toBe(1);
    expect(counts.pending).toBeUndefined();

    clock.now += 1;
    // Old enough: these still get the last count at once, and only the first starts a recount.
    const [a, b] = await Promise.all([counts.get(), counts.get()]);
    expect([countOf(a, task, 'completed'), countOf(b, task, 'completed')]).toEqual([1, 1]);
    await counts.pending;
    expect(loader.reads).toBe(2);
    expect(countOf(await counts.get(), task, 'completed')).toBe(2);
  });

  test('a slow count is reused for costFactor times as long as it took', async () => {
    const clock = { now: 5_000_000 };
    const loader = countsOverDb(clock, 500);
    const counts = new FinishedCounts({ load: loader.load, log: quietLog, minAgeMs: 2000, costFactor: 20, now: () => clock.now });
    await counts.get();
    clock.now += 9_999;
    await counts.get();
    expect(counts.pending).toBeUndefined();
    clock.now += 1;
    await counts.get();
    await counts.pending;
    expect(loader.reads).toBe(2);
  });

  test('a failed recount keeps serving the last count, and a later request tries again', async () => {
    const clock = { now: 9_000_000 };
    let fail = false;
    let reads = 0;
    const counts = new FinishedCounts({
      load: async () => {
        reads += 1;
        if (fail) await queryRows(api.db, 'SELECT no_such_column FROM stepwise.executions');
        const result = await countFinishedExecutions(api.db);
        clock.now += 100;
        return result;
      },
      log: quietLog,
      now: () => clock.now,
    });
    const before = await counts.get();
    fail = true;
    clock.now += 60_000;
    expect(await counts.get()).toBe(before);
    await counts.pending?.catch(() => undefined);
    expect(await counts.get()).toBe(before);
    await counts.pending?.catch(() => undefined);
    expect(reads).toBe(3);
  });

  test('over the API, on a small table, every count is exact at once', async () => {
    const task = uniqueTask('api-counts');
    await registerTask(api.db, task);
    const listed = async () => (await api.client.listTasks()).find((t) => t.name === task)?.counts;
    await executionIn(task, 'cancelled');
    expect(await listed()).toMatchObject({ pending: 0, running: 0, waiting: 0, cancelled: 1 });
    await api.client.schedule(task, {});
    await executionIn(task, 'running');
    await executionIn(task, 'waiting');
    await executionIn(task, 'completed');
    expect(await listed()).toMatchObject({ pending: 1, running: 1, waiting: 1, completed: 1, cancelled: 1 });
  });
});
