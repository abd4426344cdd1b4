// The throughput counts (GET /stats/throughput) read an index range over their window, never the table.
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { countThroughput, throughputStatement } from '../../src/store/throughput';

let t: TestDatabase;

/**
 * A month of history, one execution every 65 seconds over 20 tasks, mostly finished, and the last
 * hour's share of it; a thousand running ones spread over the month (more than real running rows,
 * which are recent: the running part must stay cheap at any age).
 */
beforeAll(async () => {
  t = await createTestDatabase();
  await t.db.raw(`
    INSERT INTO stepwise.executions (id, task, status, created_at, started_at, completed_at, attempt, due_at)
    SELECT gen_random_uuid(), 'task-' || (i % 20),
           CASE WHEN i % 40 = 0 THEN 'running' WHEN i % 97 = 0 THEN 'waiting' WHEN i % 31 = 0 THEN 'failed'
                WHEN i % 53 = 0 THEN 'cancelled' ELSE 'completed' END,
           at, at + interval '100 ms',
           CASE WHEN i % 40 = 0 OR i % 97 = 0 THEN NULL ELSE at + interval '2 s' END,
           1, CASE WHEN i % 40 = 0 OR i % 97 = 0 THEN now() + interval '1 minute' END
      FROM (SELECT i, now() - i * interval '65 seconds' AS at FROM generate_series(1, 40000) i) x`);
  await t.db.raw('ANALYZE stepwise.executions');
});
afterAll(async () => {
  await t.drop();
});

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Recheck Cond'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

async function plan(task: string | undefined): Promise<PlanNode> {
  const { sql, bindings } = throughputStatement(60, task);
  return t.db.transaction(async (trx) => {
    // Only a usable index can win against a sequential scan that is priced out.
    await trx.raw('SET LOCAL enable_seqscan = off');
    const { rows } = await trx.raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, bindings as never);
    return rows[0]['QUERY PLAN'][0].Plan as PlanNode;
  });
}

/** What the window holds, counted the plain way: what a range over it may read at most. */
async function inWindow(task: string | undefined): Promise<{ created: number; finished: number; running: number }> {
  const since = "to_timestamp((floor(extract(epoch FROM now()) / 60) - 59) * 60)";
  const byTask = task === undefined ? '' : ` AND task = '${task}'`;
  const { rows } = await t.db.raw(`SELECT
      count(*) FILTER (WHERE created_at >= ${since}${byTask})::int AS created,
      count(*) FILTER (WHERE status IN ('completed', 'failed') AND completed_at >= ${since})::int AS finished,
      count(*) FILTER (WHERE status = 'running'${byTask})::int AS running
    FROM stepwise.executions`);
  return rows[0];
}

describe('store: throughput', () => {
  test.each([
    ['every task', undefined, ['executions_created_idx', 'executions_running_idx', 'executions_finished_idx']],
    ['one task', 'task-3', ['executions_running_idx', 'executions_finished_idx']],
  ])('the counts of %s read index ranges over the last hour only, never the table', async (_what, task, indexes) => {
    const root = await plan(task);
    const scans = nodes(root).filter((n) => n['Relation Name'] === 'executions' || n['Index Name'] !== undefined);
    expect(scans.filter((n) => n['Node Type'] === 'Seq Scan')).toEqual([]);
    const used = new Set(scans.map((n) => n['Index Name']).filter(Boolean));
    expect(indexes.filter((name) => !used.has(name))).toEqual([]);
    // The creation and completion ranges are index conditions (bounds of the scan), not filters.
    const conds = scans.map((n) => `${n['Index Cond'] ?? ''}`).join(' ');
    expect(conds).toMatch(/created_at >= .*now\(\)/);
    expect(conds).toMatch(/completed_at >= .*now\(\)/);
    // Rows read: at most what the window holds, and the running rows (as many as the workers' slots).
    const window = await inWindow(task);
    const read = scans
      .filter((n) => n['Node Type'] !== 'Bitmap Index Scan')
      .reduce((sum, n) => sum + ((n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Index Recheck'] ?? 0)) * (n['Actual Loops'] ?? 1), 0);
    expect(window.created).toBeGreaterThan(0);
    expect(read).toBeLessThanOrEqual(window.created + window.finished + window.running);
    expect(read).toBeLessThan(40000 / 10);
  });

  test('counts each minute of the window, zeros included, in the order of time', async () => {
    const buckets = await countThroughput(t.db, 60);
    expect(buckets).toHaveLength(60);
    const { rows } = await t.db.raw(`SELECT
        count(*) FILTER (WHERE created_at >= to_timestamp((floor(extract(epoch FROM now()) / 60) - 59) * 60))::int AS created,
        count(*) FILTER (WHERE status = 'completed' AND completed_at >= to_timestamp((floor(extract(epoch FROM now()) / 60) - 59) * 60))::int AS completed,
        count(*) FILTER (WHERE status = 'failed' AND completed_at >= to_timestamp((floor(extract(epoch FROM now()) / 60) - 59) * 60))::int AS failed
      FROM stepwise.executions`);
    const total = (k: 'created' | 'completed' | 'failed') => buckets.reduce((n, b) => n + b[k], 0);
    // Read at another instant: a minute may have passed in between, moving a row or two out of the window.
    expect(Math.abs(total('created') - rows[0].created)).toBeLessThanOrEqual(2);
    expect(Math.abs(total('completed') - rows[0].completed)).toBeLessThanOrEqual(2);
    expect(Math.abs(total('failed') - rows[0].failed)).toBeLessThanOrEqual(1);
    expect(buckets.every((b, i) => i === 0 || b.start.getTime() - buckets[i - 1].start.getTime() === 60_000)).toBe(true);
  });
});
