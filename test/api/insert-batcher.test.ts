// Group commit of schedules.
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { createInsertBatcher } from '../../src/api/insert-batcher';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

describe('schedule group commit', () => {
  test('schedules that arrive together share a few statements, idempotency keys included', async () => {
    const batcher = createInsertBatcher(t.db);
    let inserts = 0;
    const count = (q: { sql: string }) => void (q.sql.includes('INSERT INTO stepwise.executions') && inserts++);
    t.db.on('query', count);
    try {
      const results = await Promise.all([
        ...Array.from({ length: 30 }, (_, i) => batcher.submit({ task: 'batch', data: { i } })),
        batcher.submit({ task: 'batch', data: 'a', idempotencyKey: 'batch-key' }),
        batcher.submit({ task: 'batch', data: 'b', idempotencyKey: 'batch-key' }),
      ]);
      // The first flushes at once (one in flight); everything that arrived meanwhile shares the next.
      expect(inserts).toBeLessThanOrEqual(3);
      expect(new Set(results.map((r) => r.execution.id)).size).toBe(31);
      expect(results.slice(30).map((r) => r.created)).toEqual([true, false]);
      expect(results[31].execution.id).toBe(results[30].execution.id);
    } finally {
      t.db.off('query', count);
    }
  });

  test('a row the database refuses fails only its own request', async () => {
    const batcher = createInsertBatcher(t.db);
    const outcomes = await Promise.allSettled([
      batcher.submit({ task: 'batch', data: { ok: 1 } }),
      batcher.submit({ task: 'batch', data: { bad: 'nul\u0000' } }),
      batcher.submit({ task: 'batch', data: { ok: 2 } }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  });

  test('hundreds of schedules at once all succeed', async () => {
    const batcher = createInsertBatcher(t.db);
    const results = await Promise.all(Array.from({ length: 450 }, (_, i) => batcher.submit({ task: 'batch-max', data: i })));
    expect(results.every((r) => r.created)).toBe(true);
  });
});
