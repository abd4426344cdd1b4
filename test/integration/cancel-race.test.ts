// A cancel that races a child's start: the child inserted while the cancel waited for the parent's
// lock is cancelled with it (the cancel finds the subtree again once it holds the locks).
import pg from 'pg';
import { defineTask, schedule, Type } from '../../src/index';
import { newExecutionId } from '../../src/domain/ids';
import { getExecution } from '../../src/store/executions';
import { claimExecutions } from '../../src/store/transitions/claim';
import { cancelExecution } from '../../src/store/transitions/cancel';
import { loadSteps } from '../../src/store/steps';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

test('a child started while the cancel waits for its parent is cancelled too, and the cancel answers cancelled', async () => {
  const parentTask = defineTask({ name: 'race-parent', data: Type.Object({}), run: async () => null });
  const { executionId: parent } = await schedule(t.db, parentTask, {});
  const [claimed] = await claimExecutions(t.db, ['race-parent'], 1, 60_000);
  const starter = new pg.Client({ connectionString: t.url });
  await starter.connect();
  try {
    // What startChild does, in a transaction held open: the parent locked, the child and its step inserted.
    const child = newExecutionId();
    await starter.query('BEGIN');
    await starter.query(`SELECT id FROM stepwise.executions WHERE id = $1 AND lease_token = $2 AND status = 'running' FOR NO KEY UPDATE`, [parent, claimed.execution.leaseToken]);
    await starter.query(`INSERT INTO stepwise.executions (id, task, status, data, idempotency_key, parent_id, due_at) VALUES ($1, 'race-child', 'pending', '{}'::jsonb, $2, $3, now())`, [child, `child:${parent}:0`, parent]);
    await starter.query(`INSERT INTO stepwise.steps (execution_id, seq, name, kind, completed, result) VALUES ($1, 0, 'child-1', 'child', false, jsonb_build_object('execution_id', $2::text))`, [parent, child]);
    const cancelling = cancelExecution(t.db, parent);
    await waitUntil(async () => {
      const { rows } = await starter.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
      return rows[0].n > 0;
    }, 'the cancel to wait for the parent');
    await starter.query('COMMIT');
    expect((await cancelling).kind).toBe('cancelled');
    expect(await getExecution(t.db, child)).toMatchObject({ status: 'cancelled', error: { message: `its parent execution ${parent} was cancelled` } });
    expect((await loadSteps(t.db, parent))[0]).toMatchObject({ name: 'child-1', outcome: 'cancelled' });
  } finally {
    await starter.end();
  }
});
