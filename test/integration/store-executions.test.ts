import pg from 'pg';
import { waitUntil } from '../helpers/wait-until';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { deliverEvent, getExecution, insertExecutions, listExecutions, listStatement, type ListFilter } from '../../src/store/executions';
import { cancelExecution } from '../../src/store/transitions/cancel';
import { countExecutionsByTaskAndStatus } from '../../src/store/execution-counts';
import { ACTIVE_STATUSES } from '../../src/domain/status';
import type { ExecutionStatus } from '../../src/domain/status';
import { loadSteps, recordStepResults, stepKey } from '../../src/store/steps';
import { suspendExecution } from '../../src/store/transitions/suspend';
import { type Lease } from '../../src/store/leases';
import { claimExecutions, claimStatements, completeAndClaimBeforeCommit } from '../../src/store/transitions/claim';
import { completeExecutions } from '../../src/store/transitions/complete';
import { returnUnstarted } from '../../src/store/transitions/release';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

/** Inserts one execution of `task` and claims it: its id and the claim's lease. */
async function claimOne(task: string): Promise<{ id: string; lease: Lease }> {
  const [{ execution }] = await insertExecutions(t.db, [{ task, data: null }]);
  const [claimed] = await claimExecutions(t.db, [task], 1, 30000);
  expect(claimed.execution.id).toBe(execution.id);
  return { id: execution.id, lease: { id: execution.id, token: claimed.execution.leaseToken as string } };
}

describe('store: executions', () => {
  test('insert with the same idempotency key returns the existing row, also within one batch', async () => {
    const [a, b] = await insertExecutions(t.db, [
      { task: 't1', data: { n: 1 }, idempotencyKey: 'k-batch' },
      { task: 't1', data: { n: 2 }, idempotencyKey: 'k-batch' },
    ]);
    expect(a.created).toBe(true);
    expect(b.created).toBe(false);
    expect(b.execution.id).toBe(a.execution.id);
    const [c] = await insertExecutions(t.db, [{ task: 't1', data: null, idempotencyKey: 'k-batch' }]);
    expect(c.created).toBe(false);
    expect(c.execution.id).toBe(a.execution.id);
  });

  test('20 concurrent inserts with one key create exactly one row', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, () => insertExecutions(t.db, [{ task: 't1', data: {}, idempotencyKey: 'k-race' }])),
    );
    const ids = new Set(results.map(([r]) => r.execution.id));
    expect(ids.size).toBe(1);
    expect(results.filter(([r]) => r.created)).toHaveLength(1);
  });

  test('concurrent claimers never take the same execution', async () => {
    await insertExecutions(t.db, Array.from({ length: 50 }, (_, i) => ({ task: 'claim-me', data: { i } })));
    const claims = await Promise.all(Array.from({ length: 5 }, () => claimExecutions(t.db, ['claim-me'], 20, 30000)));
    const ids = claims.flat().map((c) => c.execution.id);
    expect(ids).toHaveLength(50);
    expect(new Set(ids).size).toBe(50);
  });

  test('a claim takes the oldest due executions across the tasks it serves, and reads no row of the tasks it does not', async () => {
    // Another task's backlog, due before everything else.
    await insertExecutions(t.db, Array.from({ length: 300 }, (_, i) => ({ task: 'unserved', data: { i } })));
    const ids: Record<string, string> = {};
    for (const [name, task] of [['a1', 'served-a'], ['b1', 'served-b'], ['a2', 'served-a'], ['b2', 'served-b']]) {
      const [{ execution }] = await insertExecutions(t.db, [{ task, data: null }]); // one by one: due in this order
      ids[name] = execution.id;
    }
    // The plan, run and rolled back: no due row of 'unserved' is read and filtered out.
    const client = new pg.Client({ connectionString: t.url });
    await client.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query({ text: `EXPLAIN (ANALYZE, FORMAT JSON) ${claimStatements(['served-a', 'served-b']).claimSql}`, values: [3, 30, null] });
      await client.query('ROLLBACK');
      // Summed over the scans that pick due rows (their condition names due_at); the UPDATE's lookup by id is not one.
      const removed = (node: Record<string, unknown>): number =>
        (/due_at/.test(`${node['Index Cond'] ?? ''} ${node.Filter ?? ''}`) ? Number(node['Rows Removed by Filter'] ?? 0) : 0) +
        ((node.Plans as Record<string, unknown>[] | undefined) ?? []).reduce((n, p) => n + removed(p), 0);
      const plan = (rows[0]['QUERY PLAN'] as [{ Plan: Record<string, unknown> }])[0].Plan;
      expect(JSON.stringify(plan)).toContain('due_at');
      expect(removed(plan)).toBe(0);
    } finally {
      await client.end();
    }
    const claimed = await claimExecutions(t.db, ['served-a', 'served-b'], 3, 30000);
    expect(claimed.map((c) => c.execution.id).sort()).toEqual([ids.a1, ids.b1, ids.a2].sort());
    const rest = await claimExecutions(t.db, ['served-a', 'served-b'], 3, 30000);
    expect(rest.map((c) => c.execution.id)).toEqual([ids.b2]);
  });

  test('claims keep one generic plan instead of being planned again every time', async () => {
    const statements = claimStatements(['generic-a', 'generic-b']);
    const client = new pg.Client({ connectionString: t.url });
    await client.connect();
    try {
      for (let i = 0; i < 8; i++) {
        await insertExecutions(t.db, [{ task: 'generic-a', data: { i } }]);
        const { rows } = await client.query({ name: statements.claimName, text: statements.claimSql, values: [4, 30, null] });
        expect(rows).toHaveLength(1);
      }
      const { rows } = await client.query('SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1', [statements.claimName]);
      // PostgreSQL plans the first five runs for their values, then keeps the generic plan if it is no dearer.
      expect(rows[0]).toMatchObject({ custom_plans: 5, generic_plans: 3 });
    } finally {
      await client.end();
    }
  });

  test('a claim takes over an expired lease, oldest due first, beside pending executions', async () => {
    const { id: expired, lease } = await claimOne('takeover');
    await t.db.raw(`UPDATE stepwise.executions SET due_at = now() - interval '1 second' WHERE id = ?`, [expired]);
    const [{ execution: fresh }] = await insertExecutions(t.db, [{ task: 'takeover', data: null }]);
    const [first] = await claimExecutions(t.db, ['takeover'], 1, 30000);
    expect(first).toMatchObject({ execution: { id: expired }, previousStatus: 'running' });
    expect(first.execution.leaseToken).not.toBe(lease.token);
    const [second] = await claimExecutions(t.db, ['takeover'], 1, 30000);
    expect(second).toMatchObject({ execution: { id: fresh.id }, previousStatus: 'pending' });
    // Both leases are live now: nothing is due.
    await expect(claimExecutions(t.db, ['takeover'], 5, 30000)).resolves.toEqual([]);
  });

  describe('lists, with running executions kept apart from the list indexes', () => {
    const filters: Array<{ status?: ExecutionStatus; task?: string }> = [
      {},
      { task: 'mix-a' },
      { status: 'running' },
      { status: 'pending' },
      { status: 'running', task: 'mix-b' },
      { status: 'completed', task: 'mix-a' },
    ];

    beforeAll(async () => {
      // Twelve executions sharing one created_at (one batch, ties broken by id), then twelve one by one.
      await insertExecutions(t.db, Array.from({ length: 12 }, (_, i) => ({ task: i % 2 ? 'mix-b' : 'mix-a', data: { i } })));
      for (let i = 0; i < 12; i++) await insertExecutions(t.db, [{ task: i % 3 ? 'mix-b' : 'mix-a', data: { i } }]);
      // Running executions among the oldest, some of them finished, and a cancelled one in between.
      const claimed = await claimExecutions(t.db, ['mix-a', 'mix-b'], 9, 30000);
      // Picked by task: the nine oldest share one due time, so which of them a claim takes is arbitrary.
      const leasesOf = (task: string) => claimed.filter((c) => c.execution.task === task).map((c) => ({ id: c.execution.id, token: c.execution.leaseToken as string }));
      const [a, b] = [leasesOf('mix-a'), leasesOf('mix-b')];
      await completeExecutions(t.db, [a[0], a[1], b[0]].map((l) => ({ ...l, output: 1 })));
      expect((await cancelExecution(t.db, b[1].id)).kind).toBe('cancelled');
      const late = await claimExecutions(t.db, ['mix-a', 'mix-b'], 2, 30000);
      expect(late).toHaveLength(2);
      // The plans below are judged under statistics, as a server's are once autovacuum has run;
      // without them a plan would hang on whether autovacuum happened to analyze the table yet.
      await t.db.raw('ANALYZE stepwise.executions');
    });

    /** What a list must return, by a plain query over the whole table. */
    async function expected(filter: { status?: string; task?: string }, order: 'asc' | 'desc'): Promise<string[]> {
      const dir = order === 'asc' ? 'ASC' : 'DESC';
      const { rows } = await t.db.raw(
        `SELECT id FROM stepwise.executions WHERE (?::text IS NULL OR status = ?) AND (?::text IS NULL OR task = ?) ORDER BY created_at ${dir}, id ${dir}`,
        [filter.status ?? null, filter.status ?? null, filter.task ?? null, filter.task ?? null],
      );
      return rows.map((r: { id: string }) => r.id);
    }

    test.each(filters.flatMap((f) => (['asc', 'desc'] as const).map((order) => ({ ...f, order }))))(
      'pages through %j in order, running executions in their place, with the total',
      async ({ order, ...filter }) => {
        const want = await expected(filter, order);
        expect(want.length).toBeGreaterThan(filter.status === undefined ? 5 : 1);
        const limit = filter.task === undefined && filter.status === undefined ? 40 : 3;
        const seen: string[] = [];
        for (let offset = 0; ; offset += limit) {
          const page = await listExecutions(t.db, { ...filter, limit, offset, order });
          expect(page.total).toBe(want.length);
          if (page.items.length === 0) break;
          seen.push(...page.items.map((x) => x.id));
        }
        expect(seen).toEqual(want);
      },
    );

    interface PlanNode {
      'Node Type': string;
      'Relation Name'?: string;
      Plans?: PlanNode[];
    }
    const seqScannedTables = (node: PlanNode): string[] => [
      ...(node['Node Type'] === 'Seq Scan' ? [node['Relation Name'] ?? '?'] : []),
      ...(node.Plans ?? []).flatMap(seqScannedTables),
    ];

    test('every list reads through an index, never the whole table', async () => {
      for (const filter of filters) {
        const { sql, bindings } = listStatement({ ...filter, limit: 20, offset: 40, order: 'desc' });
        const plan = await t.db.transaction(async (trx) => {
          // Only a usable index can win against a sequential scan that is priced out.
          await trx.raw('SET LOCAL enable_seqscan = off');
          const { rows } = await trx.raw(`EXPLAIN (FORMAT JSON) ${sql}`, bindings as never);
          return rows[0]['QUERY PLAN'][0].Plan as PlanNode;
        });
        // The maintained counts' tables are a few rows each: only a scan of the executions counts.
        expect({ filter, seqScanned: seqScannedTables(plan).filter((r) => r === 'executions') }).toEqual({ filter, seqScanned: [] });
      }
    });

    test.each(filters.flatMap((f) => (['asc', 'desc'] as const).map((order) => ({ ...f, order }))))(
      'pages through %j by position (keyset) exactly as by offset, each part starting at the position in its index',
      async ({ order, ...filter }) => {
        const want = await expected(filter, order);
        const seen: string[] = [];
        let after: ListFilter['after'];
        for (;;) {
          const page = await listExecutions(t.db, { ...filter, limit: 2, offset: 0, order, after });
          seen.push(...page.items.map((x) => x.id));
          if (!page.next) break;
          after = page.next;
          expect(seen.length).toBeLessThan(want.length); // a position that skips nothing would page forever
        }
        expect(seen).toEqual(want);
        const { sql, bindings } = listStatement({ ...filter, limit: 20, offset: 0, order, after: { createdAt: '2020-01-01T00:00:00.000000Z', id: '0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10' } });
        const plan = await t.db.transaction(async (trx) => {
          await trx.raw('SET LOCAL enable_seqscan = off');
          const { rows } = await trx.raw(`EXPLAIN (FORMAT JSON) ${sql}`, bindings as never);
          return JSON.stringify(rows[0]['QUERY PLAN']);
        });
        // The position is an index condition (where the scan starts), not a filter over what it reads;
        // running executions alone (as many as workers run at once) are read whole from their index.
        const positioned = /"Index Cond":\s*"[^"]*ROW\(/.test(plan);
        expect({ filter, positioned, seqScan: plan.includes('Seq Scan on executions') }).toEqual({ filter, positioned: filter.status !== 'running', seqScan: false });
      },
    );

    test("one execution's children are listed through the parent index, with any other filter", async () => {
      const parentId = '0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10';
      for (const filter of [{}, { status: 'running' as const }, { status: 'completed' as const, task: 'mix-a' }]) {
        const { sql, bindings } = listStatement({ ...filter, parentId, limit: 20, offset: 0, order: 'asc' });
        const plan = await t.db.transaction(async (trx) => {
          await trx.raw('SET LOCAL enable_seqscan = off');
          const { rows } = await trx.raw(`EXPLAIN (FORMAT JSON) ${sql}`, bindings as never);
          return JSON.stringify(rows[0]['QUERY PLAN']);
        });
        expect({ filter, parentIndex: plan.includes('executions_parent_created_idx'), seqScan: plan.includes('Seq Scan') }).toEqual({ filter, parentIndex: true, seqScan: false });
      }
    });

    test('the filters by tag, key and creation range read through their indexes, running executions apart', async () => {
      const after = new Date('2020-01-01T00:00:00Z');
      const before = new Date('2030-01-01T00:00:00Z');
      const cases: Array<{ filter: Partial<ListFilter>; indexes: string[]; oneOf?: string[] }> = [
        { filter: { tags: ['eu'] }, indexes: ['executions_tags_idx', 'executions_running_idx'] },
        // With a status the planner may as well read the status index at this scale: no table scan is all.
        { filter: { tags: ['eu', 'vip'], status: 'failed' }, indexes: [] },
        { filter: { idempotencyKey: 'order-1' }, indexes: ['executions_idempotency_key_idx'] },
        // Both indexes are selective here; PostgreSQL 15 and 18 pick differently, either is fine.
        { filter: { idempotencyKey: 'order-1', status: 'running' }, indexes: [], oneOf: ['executions_running_idx', 'executions_idempotency_key_idx'] },
        { filter: { createdAfter: after, createdBefore: before }, indexes: ['executions_created_idx', 'executions_running_idx'] },
        // Both task indexes lead with the task and keep created_at in order within it.
        { filter: { task: 'mix-a', createdAfter: after }, indexes: ['executions_running_idx'], oneOf: ['executions_task_created_idx', 'executions_task_status_created_idx'] },
        { filter: { status: 'completed', createdBefore: before }, indexes: ['executions_status_created_idx'] },
      ];
      for (const { filter, indexes, oneOf } of cases) {
        const { sql, bindings } = listStatement({ ...filter, limit: 20, offset: 0, order: 'desc' });
        const plan = await t.db.transaction(async (trx) => {
          await trx.raw('SET LOCAL enable_seqscan = off');
          const { rows } = await trx.raw(`EXPLAIN (FORMAT JSON) ${sql}`, bindings as never);
          return JSON.stringify(rows[0]['QUERY PLAN']);
        });
        const used = indexes.filter((name) => plan.includes(`"${name}"`));
        expect({ filter, used, seqScan: plan.includes('Seq Scan') }).toEqual({ filter, used: indexes, seqScan: false });
        if (oneOf) expect({ filter, usedOne: oneOf.some((name) => plan.includes(`"${name}"`)) }).toEqual({ filter, usedOne: true });
      }
    });

    test('active counts include running executions', async () => {
      const counts = await countExecutionsByTaskAndStatus(t.db, ACTIVE_STATUSES);
      const { rows } = await t.db.raw(
        `SELECT task, status, count(*)::int AS count FROM stepwise.executions WHERE task LIKE 'mix-%' AND status IN ('pending','running','waiting') GROUP BY task, status`,
      );
      const mine = counts.filter((c) => c.task.startsWith('mix-'));
      expect(mine.sort((a, b) => `${a.task}${a.status}`.localeCompare(`${b.task}${b.status}`))).toEqual(
        rows.sort((a: { task: string; status: string }, b: { task: string; status: string }) => `${a.task}${a.status}`.localeCompare(`${b.task}${b.status}`)),
      );
      expect(mine.some((c) => c.status === 'running' && c.count > 0)).toBe(true);
    });
  });

  test('a claim skips rows another claim holds and still fills from the same task', async () => {
    await insertExecutions(t.db, Array.from({ length: 10 }, (_, i) => ({ task: 'held', data: { i } })));
    const holder = new pg.Client({ connectionString: t.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      const held = await holder.query({ text: claimStatements(['held']).claimSql, values: [4, 30, null] });
      expect(held.rows).toHaveLength(4);
      // The first claim has not committed: its rows are locked, and the next claim takes the 6 others.
      const other = await claimExecutions(t.db, ['held'], 10, 30000);
      expect(other).toHaveLength(6);
      expect(other.map((c) => c.execution.id).filter((id) => held.rows.some((r: { id: string }) => r.id === id))).toEqual([]);
      await holder.query('COMMIT');
    } finally {
      await holder.end();
    }
  });

  test('a completion after a cancel is discarded', async () => {
    const { id, lease } = await claimOne('race');
    expect((await cancelExecution(t.db, id)).kind).toBe('cancelled');
    const landed = await completeExecutions(t.db, [{ ...lease, output: 1 }]);
    expect(landed.size).toBe(0);
    expect((await getExecution(t.db, id))?.status).toBe('cancelled');
  });

  test('a cancel that waited for a concurrent write is stamped after that write, not when it began waiting', async () => {
    const { id } = await claimOne('cancel-stamp');
    const writer = new pg.Client({ connectionString: t.url });
    await writer.connect();
    try {
      await writer.query('BEGIN');
      await writer.query('UPDATE stepwise.executions SET steps_completed = steps_completed + 1 WHERE id = $1', [id]);
      const cancel = cancelExecution(t.db, id);
      await waitUntil(async () => {
        const { rows } = await writer.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`);
        return rows[0].n > 0;
      });
      // The step lands while the cancel waits (the worker's write won the row): it is recorded before the cancel.
      const { rows } = await writer.query(
        `INSERT INTO stepwise.steps (execution_id, seq, name, kind, completed, result, started_at, completed_at)
         VALUES ($1, 0, 'a', 'step', true, '1', clock_timestamp(), clock_timestamp()) RETURNING completed_at`,
        [id],
      );
      await writer.query('COMMIT');
      expect((await cancel).kind).toBe('cancelled');
      const cancelled = await getExecution(t.db, id);
      expect(cancelled?.leaseToken).toBeNull();
      expect(cancelled?.completedAt?.getTime()).toBeGreaterThanOrEqual((rows[0].completed_at as Date).getTime());
    } finally {
      await writer.end();
    }
  });

  test('a step record sent again after its commit (an answer lost to a connection cut) lands once and reports landed', async () => {
    const { id, lease } = await claimOne('step-retry');
    const first = { ...lease, seq: 0, name: 'charge', result: { n: 1 }, startedAt: new Date() };
    expect(await recordStepResults(t.db, [first])).toEqual(new Set([stepKey(id, 0)]));
    const second = { ...lease, seq: 1, name: 'ship', result: 2, startedAt: new Date() };
    // The retry carries the first step again, in one batch with a new one.
    const landed = await recordStepResults(t.db, [{ ...first, resent: true }, second]);
    expect(landed).toEqual(new Set([stepKey(id, 0), stepKey(id, 1)]));
    expect((await loadSteps(t.db, id)).map((s) => [s.seq, s.name, s.result])).toEqual([[0, 'charge', { n: 1 }], [1, 'ship', 2]]);
    expect((await getExecution(t.db, id))?.stepsCompleted).toBe(2);
    // A different step at a recorded position is not this attempt's: it does not land.
    expect(await recordStepResults(t.db, [{ ...lease, seq: 0, name: 'other', result: 3, startedAt: new Date(), resent: true }])).toEqual(new Set());
    expect((await getExecution(t.db, id))?.stepsCompleted).toBe(2);
  });

  test('completeAndClaimBeforeCommit records fenced completions and claims the next due executions in one statement', async () => {
    const ids = (await insertExecutions(t.db, Array.from({ length: 4 }, (_, i) => ({ task: 'fused', data: { i } })))).map((r) => r.execution.id);
    const first = await claimExecutions(t.db, ['fused'], 2, 30000);
    const [a, b] = first;
    // b's lease has expired: it is due again, but completing it in the same statement must not also claim it.
    await t.db.raw(`UPDATE stepwise.executions SET due_at = now() - interval '1 second' WHERE id = ?`, [b.execution.id]);
    const { completed, claimed, committed } = await completeAndClaimBeforeCommit(
      t.db,
      [
        // A stale item of the same execution (another lease's token) before the current one.
        { id: a.execution.id, token: '00000000-0000-4000-8000-000000000000', output: 'not held' },
        { id: a.execution.id, token: a.execution.leaseToken as string, output: 'a' },
        { id: b.execution.id, token: b.execution.leaseToken as string, output: 'b' },
      ],
      ['fused'],
      5,
      30000,
    );
    await committed;
    expect([...completed].sort()).toEqual([a.execution.id, b.execution.id].sort());
    const rest = ids.filter((id) => id !== a.execution.id && id !== b.execution.id).sort();
    expect(claimed.map((c) => c.execution.id).sort()).toEqual(rest);
    expect(claimed.every((c) => c.previousStatus === 'pending' && c.execution.status === 'running' && c.execution.attempt === 1)).toBe(true);
    expect(await getExecution(t.db, a.execution.id)).toMatchObject({ status: 'completed', output: 'a', leaseToken: null });
    expect(await getExecution(t.db, b.execution.id)).toMatchObject({ status: 'completed', output: 'b', leaseToken: null });
    // Nothing left due: only completions land.
    const again = await completeAndClaimBeforeCommit(t.db, [{ id: claimed[0].execution.id, token: claimed[0].execution.leaseToken as string, output: 1 }], ['fused'], 5, 30000);
    await again.committed;
    expect(again.completed).toEqual(new Set([claimed[0].execution.id]));
    expect(again.claimed).toEqual([]);
  });

  test('returnUnstarted gives a claim back: status before it, due now, the attempt it counted taken back', async () => {
    const [{ execution: fresh }] = await insertExecutions(t.db, [{ task: 'give-back', data: null }]);
    const [c] = await claimExecutions(t.db, ['give-back'], 1, 30000);
    expect(c.execution).toMatchObject({ id: fresh.id, attempt: 1 });
    const returned = await returnUnstarted(t.db, [
      { id: fresh.id, token: c.execution.leaseToken as string, previousStatus: c.previousStatus },
      { id: fresh.id, token: '00000000-0000-4000-8000-000000000000', previousStatus: 'pending' },
    ]);
    expect(returned).toEqual(new Set([fresh.id]));
    expect(await getExecution(t.db, fresh.id)).toMatchObject({ status: 'pending', attempt: 0, startedAt: null, leaseToken: null });
    // A resumed (waiting) execution goes back to waiting, its attempt untouched.
    const [again] = await claimExecutions(t.db, ['give-back'], 1, 30000);
    await suspendExecution(t.db, { id: fresh.id, token: again.execution.leaseToken as string }, [{ seq: 1, name: 'nap', kind: 'sleep', wakeAt: new Date(Date.now() - 1000) }], null, 'nap');
    const [resumed] = await claimExecutions(t.db, ['give-back'], 1, 30000);
    expect(resumed.previousStatus).toBe('waiting');
    await returnUnstarted(t.db, [{ id: fresh.id, token: resumed.execution.leaseToken as string, previousStatus: 'waiting' }]);
    expect(await getExecution(t.db, fresh.id)).toMatchObject({ status: 'waiting', attempt: 1, leaseToken: null });
  });

  test('list pages in (created_at, id) order never skip or repeat', async () => {
    const seen = new Set<string>();
    const { total } = await listExecutions(t.db, { limit: 1, offset: 0, order: 'asc' });
    for (let offset = 0; offset < total; offset += 7) {
      const page = await listExecutions(t.db, { limit: 7, offset, order: 'asc' });
      for (const e of page.items) seen.add(e.id);
    }
    expect(seen.size).toBe(total);
  });

  test('completing 600 executions in one statement notifies every id, in payloads PostgreSQL accepts', async () => {
    const listener = new pg.Client({ connectionString: t.url });
    await listener.connect();
    const heard = new Set<string>();
    listener.on('notification', (m) => m.payload?.split(',').forEach((id) => heard.add(id)));
    await listener.query('LISTEN stepwise_changed');
    try {
      await insertExecutions(t.db, Array.from({ length: 600 }, (_, i) => ({ task: 'bulk-done', data: { i } })));
      const claimed = await claimExecutions(t.db, ['bulk-done'], 600, 30000);
      expect(claimed).toHaveLength(600);
      const landed = await completeExecutions(t.db, claimed.map((c) => ({ id: c.execution.id, token: c.execution.leaseToken as string, output: null })));
      expect(landed.size).toBe(600);
      await waitUntil(() => heard.size === 600, 'all 600 notifications');
    } finally {
      await listener.end();
    }
  });

  test('ten concurrent deliveries of one event: exactly one delivers, and the step holds its payload', async () => {
    const { id, lease } = await claimOne('event-race');
    expect(await suspendExecution(t.db, lease, [{ seq: 0, name: 'go', kind: 'event', eventName: 'go', wakeAt: null }], null, 'go')).toBeDefined();
    const outcomes = await Promise.all(Array.from({ length: 10 }, (_, i) => deliverEvent(t.db, id, 'go', { i })));
    const winners = outcomes.filter((o) => o.kind === 'delivered');
    expect(winners).toHaveLength(1);
    const [step] = await loadSteps(t.db, id);
    expect(step).toMatchObject({ kind: 'event', completed: true });
    expect((step.result as { payload: { i: number } }).payload.i).toBe(outcomes.indexOf(winners[0]));
    expect(await getExecution(t.db, id)).toMatchObject({ stepsCompleted: 1, waitEventName: null });
  });
});
