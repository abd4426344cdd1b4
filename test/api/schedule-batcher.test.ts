// Group commit of schedules.
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { ScheduleBatcher } from '../../src/api/schedule-batcher';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

describe('ScheduleBatcher', () => {
  test('schedules that arrive together are inserted by one statement, idempotency keys included', async () => {
    const batcher = new ScheduleBatcher(t.db);
    let inserts = 0;
    const count = (q: { sql: string }) => void (q.sql.includes('INSERT INTO stepwise.executions') && inserts++);
    t.db.on('query', count);
    try {
      const results = await Promise.all([
        ...Array.from({ length: 30 }, (_, i) => batcher.schedule({ task: 'batch', data: { i } })),
        batcher.schedule({ task: 'batch', data: 'a', idempotencyKey: 'batch-key' }),
        batcher.schedule({ task: 'batch', data: 'b', idempotencyKey: 'batch-key' }),
      ]);
      expect(inserts).toBe(1);
      expect(new Set(results.map((r) => r.execution.id)).size).toBe(31);
      expect(results.slice(30).map((r) => r.created)).toEqual([true, false]);
      expect(results[31].execution.id).toBe(results[30].execution.id);
    } finally {
      t.db.off('query', count);
    }
  });

  test('a row the database refuses fails only its own request', async () => {
    const batcher = new ScheduleBatcher(t.db);
    const outcomes = await Promise.allSettled([
      batcher.schedule({ task: 'batch', data: { ok: 1 } }),
      batcher.schedule({ task: 'batch', data: { bad: 'nul\u0000' } }),
      batcher.schedule({ task: 'batch', data: { ok: 2 } }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  });

  test('more schedules than maxBatch are split into several batches and all succeed', async () => {
    const batcher = new ScheduleBatcher(t.db, 5);
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => batcher.schedule({ task: 'batch-max', data: i })));
    expect(results.every((r) => r.created)).toBe(true);
  });
});
