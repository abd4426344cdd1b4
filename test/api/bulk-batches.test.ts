// Bulk actions in bounded time (issue 42, row 4): a bulk action works in batches under a time budget
// per request and answers with what it did and a cursor to continue, never half-writing a row.
import { queryRows } from '../../src/store/db';
import { insertExecutions } from '../../src/store/executions';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { uniqueTask } from '../helpers/simulated-worker';

const BATCH = 50;
let api: TestApi;

beforeAll(async () => {
  // A budget of 0: every request stops after its first batch, whatever the machine's speed.
  api = await startTestApi({ http: { bulkBatchSize: BATCH, bulkBudgetMs: 0 } });
});
afterAll(async () => {
  await api.close();
});

interface BulkAnswer {
  matched: number;
  changed: number;
  next_cursor: string | null;
}

async function pending(task: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let at = 0; at < n; at += 500) {
    const made = await insertExecutions(api.db, Array.from({ length: Math.min(500, n - at) }, (_, i) => ({ task, data: { i: at + i } })));
    ids.push(...made.map((m) => m.execution.id));
  }
  return ids;
}

const bulkCancel = async (body: Record<string, unknown>) => {
  const answer = await api.call('POST', '/api/v1/executions/bulk-cancel', { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { status: answer.status, body: answer.body as BulkAnswer };
};

const statuses = async (task: string) =>
  Object.fromEntries(
    (await queryRows<{ status: string; n: number }>(api.db, 'SELECT status, count(*)::int AS n FROM stepwise.executions WHERE task = ? GROUP BY status', [task])).map((r) => [r.status, r.n]),
  );

test('a bulk cancel of 2,000 answers batch by batch with a cursor; continued to the end it cancels each once, whole, and none created after it began', async () => {
  const task = uniqueTask('bulk-2000');
  await pending(task, 2000);
  const answers: BulkAnswer[] = [];
  const created: string[] = [];
  let cursor: string | null | undefined;
  do {
    const answer = await bulkCancel({ task, limit: 10000, ...(cursor ? { cursor } : {}) });
    expect(answer.status).toBe(200);
    answers.push(answer.body);
    cursor = answer.body.next_cursor;
    // Executions scheduled while the action goes on are not its own.
    if (answers.length % 10 === 1) created.push(...(await pending(task, 1)));
    expect(answers.length).toBeLessThan(100);
  } while (cursor);
  expect(answers[0]).toEqual({ matched: BATCH, changed: BATCH, next_cursor: expect.any(String) });
  expect(answers.every((a) => a.matched <= BATCH && a.changed === a.matched)).toBe(true);
  expect(answers.reduce((n, a) => n + a.changed, 0)).toBe(2000);
  expect(await statuses(task)).toEqual({ cancelled: 2000, pending: created.length });
  // Each row's change was whole: a cancelled execution carries its end and its error, and is not due.
  const partial = await queryRows(api.db, "SELECT id FROM stepwise.executions WHERE task = ? AND status = 'cancelled' AND (completed_at IS NULL OR error IS NULL OR due_at IS NOT NULL)", [task]);
  expect(partial).toEqual([]);
});

test('limit counts the executions of every request of the action', async () => {
  const task = uniqueTask('bulk-limit');
  await pending(task, 200);
  const answers: BulkAnswer[] = [];
  let cursor: string | null = null;
  do {
    const answer: { status: number; body: BulkAnswer } = await bulkCancel({ task, limit: 120, ...(cursor ? { cursor } : {}) });
    answers.push(answer.body);
    cursor = answer.body.next_cursor;
  } while (cursor);
  expect(answers.map((a) => a.matched)).toEqual([50, 50, 20]);
  expect(await statuses(task)).toEqual({ cancelled: 120, pending: 80 });
});

test('the typed client runs an action to its end, summing the answers; a cursor the server did not make is 422', async () => {
  const task = uniqueTask('bulk-client');
  await pending(task, 130);
  expect(await api.client.bulkCancel({ task })).toEqual({ matched: 130, changed: 130, next_cursor: null });
  const refused = await bulkCancel({ task, cursor: 'bm90LWEtY3Vyc29y' });
  expect(refused.status).toBe(422);
  expect(refused.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body/cursor' }] } });
});
