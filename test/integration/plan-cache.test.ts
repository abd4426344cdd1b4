// The hot statements keep one generic plan on a table of a real size. Planned for their values, a
// small batch (4 ids, LIMIT 4) looks cheaper than the generic plan, and PostgreSQL would plan every
// run anew: on an empty table the generic plan wins anyway, so the table here holds finished rows
// and a backlog.
import { queryRows } from '../../src/store/db';
import { insertExecutions } from '../../src/store/executions';
import { renewLeases, type Lease } from '../../src/store/leases';
import { recordStepResults } from '../../src/store/steps';
import { claimExecutions, claimStatements, completeAndClaimBeforeCommit } from '../../src/store/transitions/claim';
import { completeExecutions } from '../../src/store/transitions/complete';
import { createTestDatabase, type TestDatabase } from '../helpers/db';

let t: TestDatabase;
beforeAll(async () => {
  // One connection: every statement is prepared on it, and pg_prepared_statements shows that session's.
  t = await createTestDatabase({ poolMax: 1 });
  await t.db.raw(`INSERT INTO stepwise.executions (id, task, status, data, created_at, completed_at)
                  SELECT gen_random_uuid(), 'hot', 'completed', '{}', now(), now() FROM generate_series(1, 20000)`);
  // And a backlog, due now, for the claims to take from.
  await t.db.raw(`INSERT INTO stepwise.executions (id, task, status, data, created_at, due_at)
                  SELECT gen_random_uuid(), 'hot', 'pending', '{}', now(), now() FROM generate_series(1, 2000)`);
  await t.db.raw('ANALYZE stepwise.executions');
});
afterAll(async () => {
  await t.drop();
});

const RUNS = 8;
const BATCH = 4;

test('claims, step records, lease renewals, completions and inserts are planned five times, then no more', async () => {
  const tasks = ['hot'];
  for (let run = 0; run < RUNS; run++) {
    // One at a time, as an idle API server inserts a request.
    await insertExecutions(t.db, [{ task: 'hot', data: { run } }]);
    const claimed = await claimExecutions(t.db, tasks, BATCH, 60_000);
    expect(claimed).toHaveLength(BATCH);
    const leases: Lease[] = claimed.map((c) => ({ id: c.execution.id, token: c.execution.leaseToken as string }));
    const steps = await recordStepResults(
      t.db,
      leases.map((l) => ({ ...l, seq: 0, name: 'one', result: { run }, startedAt: new Date() })),
    );
    expect(steps.size).toBe(BATCH);
    expect(await renewLeases(t.db, leases, 60_000)).toEqual(new Set(leases.map((l) => l.id)));
    const [first, second, ...rest] = leases;
    expect(await completeExecutions(t.db, [first, second].map((l) => ({ ...l, output: run })))).toEqual(new Set([first.id, second.id]));
    const fused = await completeAndClaimBeforeCommit(t.db, rest.map((l) => ({ ...l, output: run })), tasks, BATCH, 60_000);
    await fused.committed;
    expect(fused.completed).toEqual(new Set(rest.map((l) => l.id)));
    expect(fused.claimed).toHaveLength(BATCH);
    await completeExecutions(t.db, fused.claimed.map((c) => ({ id: c.execution.id, token: c.execution.leaseToken as string, output: null })));
  }
  const { claimName, completeName } = claimStatements(tasks);
  const names = ['stepwise_schedule_executions', claimName, 'stepwise_record_steps_v2', 'stepwise_renew', 'stepwise_complete', completeName];
  const plans = await queryRows<{ name: string; generic_plans: number; custom_plans: number }>(
    t.db,
    'SELECT name, generic_plans::int, custom_plans::int FROM pg_prepared_statements WHERE name = ANY(?) ORDER BY name',
    [names],
  );
  // Five runs planned for their values, every later one on the generic plan.
  expect(Object.fromEntries(plans.map((p) => [p.name, p.custom_plans]))).toEqual(Object.fromEntries(names.map((n) => [n, 5])));
});
