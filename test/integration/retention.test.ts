import { RetentionSweeper } from '../../src/engine/retention';
import { getExecution, insertExecutions } from '../../src/store/executions';
import { queryRows } from '../../src/store/db';
import { DELETE_FINISHED_SQL, deleteFinishedExecutions, deleteOldRateStarts } from '../../src/store/retention';
import { loadSteps } from '../../src/store/steps';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { quietLog } from '../helpers/worker';

const DAY = 86_400_000;
const NOW = Date.now();
const ago = (ms: number) => new Date(NOW - ms);

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

/** An execution of `task` put straight into `status`, created and finished at the given times. */
async function executionIn(task: string, status: string, createdAt: Date, completedAt: Date | null, idempotencyKey?: string): Promise<string> {
  const [{ execution }] = await insertExecutions(api.db, [{ task, data: { status }, idempotencyKey }]);
  await queryRows(api.db, 'UPDATE stepwise.executions SET status = ?, created_at = ?, completed_at = ?, due_at = NULL WHERE id = ?', [status, createdAt, completedAt, execution.id]);
  return execution.id;
}

async function exists(ids: readonly string[]): Promise<Set<string>> {
  const rows = await queryRows<{ id: string }>(api.db, 'SELECT id FROM stepwise.executions WHERE id = ANY(?::uuid[])', [ids]);
  return new Set(rows.map((r) => r.id));
}

describe('retention: finished executions are deleted once past the retention period', () => {
  test('only executions that finished before the cutoff go, with their steps; active and recent ones stay', async () => {
    const task = uniqueTask('retention');
    const gone = [
      await executionIn(task, 'completed', ago(40 * DAY), ago(40 * DAY)),
      await executionIn(task, 'failed', ago(35 * DAY), ago(34 * DAY)),
      await executionIn(task, 'cancelled', ago(31 * DAY), ago(31 * DAY)),
    ];
    const kept = [
      await executionIn(task, 'completed', ago(2 * DAY), ago(2 * DAY)),
      // Created long ago, finished recently: its retention counts from when it finished.
      await executionIn(task, 'completed', ago(90 * DAY), ago(1 * DAY)),
      await executionIn(task, 'pending', ago(60 * DAY), null),
      await executionIn(task, 'waiting', ago(60 * DAY), null),
      await executionIn(task, 'running', ago(60 * DAY), null),
    ];
    await queryRows(api.db, `INSERT INTO stepwise.steps (execution_id, seq, name, kind, completed, result) VALUES (?, 0, 'a', 'step', true, '1'), (?, 0, 'a', 'step', true, '1')`, [gone[0], kept[0]]);

    const deleted = await deleteFinishedExecutions(api.db, ago(30 * DAY), 1000);

    expect(deleted).toBe(3);
    const left = await exists([...gone, ...kept]);
    expect(gone.filter((id) => left.has(id))).toEqual([]);
    expect(kept.filter((id) => !left.has(id))).toEqual([]);
    expect(await loadSteps(api.db, gone[0])).toEqual([]);
    expect(await loadSteps(api.db, kept[0])).toHaveLength(1);
  });

  test('rate-limit start stamps older than a day go; younger ones, still in some window, stay', async () => {
    const task = uniqueTask('rated');
    await queryRows(
      api.db,
      `INSERT INTO stepwise.rate_starts (task, key, started_at) VALUES (?, '', now() - interval '25 hours'), (?, 'a', now() - interval '26 hours'), (?, '', now() - interval '23 hours')`,
      [task, task, task],
    );
    expect(await deleteOldRateStarts(api.db, 1)).toBe(1);
    expect(await deleteOldRateStarts(api.db, 100)).toBeGreaterThanOrEqual(1);
    const left = await queryRows<{ key: string }>(api.db, 'SELECT key FROM stepwise.rate_starts WHERE task = ?', [task]);
    expect(left).toEqual([{ key: '' }]);
  });

  test('finds its rows through an index, never by reading the whole table', async () => {
    const client = await (api.db.client as { acquireConnection(): Promise<import('pg').ClientBase> }).acquireConnection();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL enable_seqscan = off');
      const text = DELETE_FINISHED_SQL.replace('?', '$1').replace('?', '$2').replace('?', '$3');
      const plan = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${text}`, [ago(DAY), ago(DAY), 10]);
      const lines = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(lines).not.toMatch(/Seq Scan/);
      expect(lines).toMatch(/executions_status_created_idx/);
    } finally {
      await client.query('ROLLBACK');
      await (api.db.client as { releaseConnection(c: unknown): Promise<void> }).releaseConnection(client);
    }
  });

  test('a sweep deletes batch after batch until none is left; concurrent sweeps share the rows without deleting one twice', async () => {
    const task = uniqueTask('retention-batches');
    const old = await Promise.all(Array.from({ length: 25 }, () => executionIn(task, 'completed', ago(10 * DAY), ago(10 * DAY))));
    const counts: number[] = [];
    const sweepers = [0, 1, 2].map(() => new RetentionSweeper({ db: api.db, log: quietLog, keepFinishedMs: 5 * DAY, batchSize: 4, onDeleted: (n) => counts.push(n) }));

    const totals = await Promise.all(sweepers.map((s) => s.sweep()));

    expect(totals.reduce((a, b) => a + b, 0)).toBe(25);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(25);
    expect(Math.max(...counts)).toBeLessThanOrEqual(4);
    expect((await exists(old)).size).toBe(0);
    expect(await sweepers[0].sweep()).toBe(0);
  });

  test('a started sweeper sweeps on its interval, and stop() ends it', async () => {
    const task = uniqueTask('retention-interval');
    const sweeper = new RetentionSweeper({ db: api.db, log: quietLog, keepFinishedMs: DAY, intervalMs: 50 });
    sweeper.start();
    const first = await executionIn(task, 'completed', ago(3 * DAY), ago(3 * DAY));
    const second = await executionIn(task, 'failed', ago(3 * DAY), ago(2 * DAY));
    await waitUntil(async () => (await exists([first, second])).size === 0, 'the sweeper to delete both', 5000);
    await sweeper.stop();
    const after = await executionIn(task, 'completed', ago(3 * DAY), ago(3 * DAY));
    await new Promise((r) => setTimeout(r, 300));
    expect((await exists([after])).size).toBe(1);
  });

  test('a sweep pauses between batches in proportion to their time, and stop() cuts the pause short', async () => {
    const task = uniqueTask('retention-paced');
    const old = [];
    // Older than any other test's executions, so that this sweep takes only these.
    for (let i = 0; i < 6; i++) old.push(await executionIn(task, 'completed', ago(1000 * DAY), ago(1000 * DAY)));
    const counts: number[] = [];
    // A batch of this size takes a millisecond or more, so the pause after it lasts seconds.
    const sweeper = new RetentionSweeper({ db: api.db, log: quietLog, keepFinishedMs: 999 * DAY, batchSize: 2, busyShare: 0.0002, onDeleted: (n) => counts.push(n) });
    const sweeping = sweeper.sweep();
    await waitUntil(() => counts.length === 1, 'the first batch', 5000);
    await new Promise((r) => setTimeout(r, 200));
    expect(counts).toEqual([2]); // still pausing
    const stopAsked = performance.now();
    await sweeper.stop();
    expect(performance.now() - stopAsked).toBeLessThan(1000);
    expect(await sweeping).toBe(2);
    expect((await exists(old)).size).toBe(4);
    expect(() => new RetentionSweeper({ db: api.db, log: quietLog, keepFinishedMs: DAY, busyShare: 0 })).toThrow(RangeError);
  });

  test('over the API, a deleted execution is not found, and its idempotency key schedules a new one', async () => {
    const task = uniqueTask('retention-api');
    await registerTask(api.db, task);
    const old = await executionIn(task, 'completed', ago(40 * DAY), ago(40 * DAY), `key-${task}`);
    expect((await api.client.schedule(task, {}, { idempotencyKey: `key-${task}` })).execution_id).toBe(old);

    await deleteFinishedExecutions(api.db, ago(30 * DAY), 1000);

    await expect(api.client.get(old)).rejects.toMatchObject({ status: 404, code: 'execution_not_found' });
    const again = await api.client.schedule(task, {}, { idempotencyKey: `key-${task}` });
    expect(again.created).toBe(true);
    expect(again.execution_id).not.toBe(old);
  });

  test('a key whose execution is deleted between the insert and its read-back is scheduled anew, not an error', async () => {
    const task = uniqueTask('retention-race');
    const key = `key-${task}`;
    const old = await executionIn(task, 'completed', ago(40 * DAY), ago(40 * DAY), key);
    // Stands in for a sweep that commits between the two statements: the insert skips the taken key,
    // then this trigger deletes the row that held it before the read-back can see it.
    await queryRows(
      api.db,
      `CREATE FUNCTION stepwise.test_sweep_between() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN DELETE FROM stepwise.executions WHERE id = '${old}'; RETURN NULL; END $$;
       CREATE TRIGGER test_sweep_between AFTER INSERT ON stepwise.executions FOR EACH STATEMENT EXECUTE FUNCTION stepwise.test_sweep_between();`,
    );
    try {
      const [result] = await insertExecutions(api.db, [{ task, data: null, idempotencyKey: key }]);
      expect(result.created).toBe(true);
      expect(result.execution.id).not.toBe(old);
      expect(await getExecution(api.db, result.execution.id)).toMatchObject({ idempotencyKey: key, status: 'pending' });
    } finally {
      await queryRows(api.db, 'DROP TRIGGER test_sweep_between ON stepwise.executions; DROP FUNCTION stepwise.test_sweep_between()');
    }
  });
});
