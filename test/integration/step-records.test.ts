// Step records written again after a cut connection land once.
import { insertExecutions } from '../../src/store/executions';
import { claimExecutions } from '../../src/store/transitions/claim';
import { loadSteps, recordStepFailure } from '../../src/store/steps';
import { createTestDatabase, type TestDatabase } from '../helpers/db';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

test('a failed attempt sent twice (its first answer lost) is kept once; the next attempt is appended', async () => {
  const [{ execution }] = await insertExecutions(t.db, [{ task: 'records', data: {} }]);
  const [claimed] = await claimExecutions(t.db, ['records'], 1, 60_000);
  const lease = { id: execution.id, token: claimed.execution.leaseToken as string };
  const failure = (attempt: number) => ({ seq: 0, name: 'flaky', attempt, error: { type: 'Error', message: `attempt ${attempt}`, retryable: true }, startedAt: new Date(), final: false });
  expect(await recordStepFailure(t.db, lease, failure(1))).toBe(true);
  expect(await recordStepFailure(t.db, lease, failure(1))).toBe(true);
  expect(await recordStepFailure(t.db, lease, failure(2))).toBe(true);
  const [step] = await loadSteps(t.db, execution.id);
  expect(step.failures.map((f) => [f.attempt, f.error.message])).toEqual([
    [1, 'attempt 1'],
    [2, 'attempt 2'],
  ]);
});
