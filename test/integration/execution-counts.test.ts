import type { Knex } from 'knex';
import { queryRows, type Db } from '../../src/store/db';
import { countExecutionsByTaskAndStatus, foldExecutionCounts, maintainedCountSql, type CountFilter } from '../../src/store/execution-counts';
import { insertExecutions, listExecutions } from '../../src/store/executions';
import { deleteFinishedExecutions } from '../../src/store/retention';
import { claimExecutions } from '../../src/store/transitions/claim';
import { completeAs, failAs, registerTask, uniqueTask, waitForEventAs } from '../helpers/simulated-worker';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';
import { quietLog } from '../helpers/worker';
import { CountFolder } from '../../src/engine/count-folder';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

/** The maintained count and count(*) for `filter`, read in one snapshot. */
async function bothCounts(db: Db | Knex.Transaction, filter: CountFilter): Promise<{ maintained: number; counted: number }> {
  const kept = maintainedCountSql(filter);
  const where = [filter.task !== undefined ? 'task = ?' : 'true', filter.status !== undefined ? 'status = ?' : 'true'].join(' AND ');
  const values = [filter.task, filter.status].filter((v) => v !== undefined);
  const [row] = await queryRows<{ maintained: string; counted: string }>(
    db,
    `SELECT ${kept.sql}::text AS maintained, (SELECT count(*) FROM stepwise.executions WHERE ${where})::text AS counted`,
    [...kept.bindings, ...values],
  );
  return { maintained: Number(row.maintained), counted: Number(row.counted) };
}

async function groupedByCount(db: Db): Promise<Record<string, number>> {
  const rows = await queryRows<{ task: string; status: string; count: number }>(db, 'SELECT task, status, count(*)::int AS count FROM stepwise.executions GROUP BY task, status');
  return Object.fromEntries(rows.map((r) => [`${r.task}/${r.status}`, r.count]));
}

async function groupedByMaintained(db: Db): Promise<Record<string, number>> {
  return Object.fromEntries((await countExecutionsByTaskAndStatus(db)).map((r) => [`${r.task}/${r.status}`, r.count]));
}

describe('maintained execution counts', () => {
  test('every kind of write keeps them equal to count(*), before and after a fold', async () => {
    const task = uniqueTask('counts');
    await registerTask(t.db, task);
    const inserted = await insertExecutions(t.db, Array.from({ length: 5 }, (_, i) => ({ task, data: { i } })));
    const [a, b, c, , e] = inserted.map((x) => x.execution.id);
    // One claim takes all five: they run.
    const claimed = await claimExecutions(t.db, [task], 100, 30000);
    expect(claimed).toHaveLength(5);
    const lease = (id: string) => ({ id, token: claimed.find((x) => x.execution.id === id)?.execution.leaseToken as string });
    await completeAs(t.db, lease(a), { ok: true });
    await failAs(t.db, lease(b), 'boom');
    await waitForEventAs(t.db, lease(c), 'go');
    await queryRows(t.db, "UPDATE stepwise.executions SET status = 'cancelled', completed_at = now(), due_at = NULL WHERE id = ?", [e]);
    await insertExecutions(t.db, [{ task, data: {} }, { task, data: {} }]);
    // A write that leaves task and status alone adds no delta.
    const before = await queryRows<{ n: number }>(t.db, 'SELECT count(*)::int AS n FROM stepwise.execution_count_deltas');
    await queryRows(t.db, "UPDATE stepwise.executions SET tags = ARRAY['x'] WHERE task = ?", [task]);
    const after = await queryRows<{ n: number }>(t.db, 'SELECT count(*)::int AS n FROM stepwise.execution_count_deltas');
    expect(after[0].n).toBe(before[0].n);

    const counted = await groupedByCount(t.db);
    expect(['pending', 'running', 'waiting', 'completed', 'failed', 'cancelled'].map((s) => counted[`${task}/${s}`])).toEqual([2, 1, 1, 1, 1, 1]);
    expect(await groupedByMaintained(t.db)).toEqual(counted);

    // Retention deletes too.
    await queryRows(t.db, "UPDATE stepwise.executions SET completed_at = now() - interval '40 days', created_at = now() - interval '41 days' WHERE id = ANY(?::uuid[])", [[a, b, e]]);
    expect(await deleteFinishedExecutions(t.db, new Date(Date.now() - 86_400_000), 100)).toBe(3);
    expect(await groupedByMaintained(t.db)).toEqual(await groupedByCount(t.db));

    expect(await foldExecutionCounts(t.db)).toBeGreaterThan(0);
    expect(await queryRows(t.db, 'SELECT 1 FROM stepwise.execution_count_deltas')).toHaveLength(0);
    expect(await groupedByMaintained(t.db)).toEqual(await groupedByCount(t.db));
    for (const filter of [{}, { task }, { status: 'pending' }, { task, status: 'running' }, { task: 'no-such-task' }]) {
      const both = await bothCounts(t.db, filter);
      expect(both.maintained).toBe(both.counted);
    }
  });

  test('the list total is the maintained count, by task and status', async () => {
    const task = uniqueTask('list-total');
    await registerTask(t.db, task);
    await insertExecutions(t.db, Array.from({ length: 7 }, () => ({ task, data: {} })));
    await queryRows(t.db, "UPDATE stepwise.executions SET status = 'cancelled', completed_at = now(), due_at = NULL WHERE id IN (SELECT id FROM stepwise.executions WHERE task = ? LIMIT 3)", [task]);
    // Made wrong on purpose: a total that still counted rows would not see it.
    await queryRows(t.db, "INSERT INTO stepwise.execution_count_deltas (task, status, n) VALUES (?, 'pending', 100)", [task]);
    const page = (filter: { task?: string; status?: 'pending' | 'cancelled' }) => listExecutions(t.db, { ...filter, limit: 2, offset: 0, order: 'desc' });
    expect((await page({ task })).total).toBe(107);
    expect((await page({ task, status: 'pending' })).total).toBe(104);
    expect((await page({ task, status: 'cancelled' })).total).toBe(3);
    // Any other filter counts its rows.
    expect((await listExecutions(t.db, { task, createdAfter: new Date(0), limit: 2, offset: 0, order: 'desc' })).total).toBe(7);
    await queryRows(t.db, "INSERT INTO stepwise.execution_count_deltas (task, status, n) VALUES (?, 'pending', -100)", [task]);
    expect((await page({ task })).total).toBe(7);
  });

  test('one snapshot sees counts equal to count(*) while writers and folds run at once', async () => {
    const task = uniqueTask('busy');
    await registerTask(t.db, task);
    let running = true;
    let writes = 0;
    let folded = 0;
    const writer = (async () => {
      while (running) {
        await insertExecutions(t.db, Array.from({ length: 5 }, () => ({ task, data: {} })));
        await queryRows(t.db, "UPDATE stepwise.executions SET status = 'cancelled', completed_at = now(), due_at = NULL WHERE id IN (SELECT id FROM stepwise.executions WHERE task = ? AND status = 'pending' LIMIT 3)", [task]);
        await queryRows(t.db, "DELETE FROM stepwise.executions WHERE id IN (SELECT id FROM stepwise.executions WHERE task = ? AND status = 'cancelled' LIMIT 2)", [task]);
        writes++;
      }
    })();
    const folders = [0, 1].map(async () => {
      while (running) folded += await foldExecutionCounts(t.db);
    });
    const mismatches: string[] = [];
    for (let i = 0; i < 150; i++) {
      await t.db.transaction(
        async (trx) => {
          for (const filter of [{}, { task }, { task, status: 'cancelled' }]) {
            const both = await bothCounts(trx, filter);
            if (both.maintained !== both.counted) mismatches.push(`${JSON.stringify(filter)}: ${both.maintained} vs ${both.counted}`);
          }
        },
        { isolationLevel: 'repeatable read' },
      );
    }
    running = false;
    await Promise.all([writer, ...folders]);
    expect(mismatches).toEqual([]);
    expect(writes).toBeGreaterThan(5);
    expect(folded).toBeGreaterThan(0);
  });

  test('a CountFolder folds the deltas on its interval until stopped', async () => {
    const folder = new CountFolder({ db: t.db, log: quietLog, intervalMs: 20 });
    folder.start();
    try {
      await insertExecutions(t.db, [{ task: uniqueTask('folded'), data: {} }]);
      await waitUntil(async () => (await queryRows(t.db, 'SELECT 1 FROM stepwise.execution_count_deltas')).length === 0);
    } finally {
      await folder.stop();
    }
    await insertExecutions(t.db, [{ task: uniqueTask('after-stop'), data: {} }]);
    await new Promise((r) => setTimeout(r, 100));
    expect(await queryRows(t.db, 'SELECT 1 FROM stepwise.execution_count_deltas')).toHaveLength(1);
    const both = await bothCounts(t.db, {});
    expect(both.maintained).toBe(both.counted);
  });

  test('TRUNCATE empties the counts', async () => {
    const trx = await t.db.transaction();
    try {
      await trx.raw('TRUNCATE stepwise.executions CASCADE');
      expect(await bothCounts(trx, {})).toEqual({ maintained: 0, counted: 0 });
    } finally {
      await trx.rollback();
    }
    const both = await bothCounts(t.db, {});
    expect(both.counted).toBeGreaterThan(0);
    expect(both.maintained).toBe(both.counted);
  });
});
