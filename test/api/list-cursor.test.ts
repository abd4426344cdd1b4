// Deep pages (issue 42, row 3): an offset walks every execution it skips, so it is bounded, and
// keyset paging (`cursor`, `next_cursor`) reaches any depth at the cost of a first page.
import { queryRows } from '../../src/store/db';
import { insertExecutions } from '../../src/store/executions';
import { claimExecutions } from '../../src/store/transitions/claim';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { uniqueTask } from '../helpers/simulated-worker';

const MAX_OFFSET = 30;
let api: TestApi;

beforeAll(async () => {
  api = await startTestApi({ http: { listMaxOffset: MAX_OFFSET } });
});
afterAll(async () => {
  await api.close();
});

interface Page {
  executions: Array<{ execution_id: string }>;
  next_cursor: string | null;
  offset: number;
  total: number;
}

const list = async (query: string) => {
  const answer = await api.call('GET', `/api/v1/executions?${query}`);
  return { status: answer.status, body: answer.body as Page & { error?: { code: string; details?: Array<{ path: string; message: string }> } } };
};

describe('the offset bound', () => {
  test('an offset up to the configured maximum is served; one past it is 422 invalid_data pointing to cursor', async () => {
    expect((await list(`offset=${MAX_OFFSET}`)).status).toBe(200);
    const refused = await list(`offset=${MAX_OFFSET + 1}`);
    expect(refused.status).toBe(422);
    expect(refused.body.error).toEqual({
      code: 'invalid_data',
      message: expect.any(String),
      details: [{ path: 'query/offset', message: expect.stringMatching(new RegExp(`at most ${MAX_OFFSET}.*cursor`)) }],
    });
  });

  test('a cursor with an offset, a cursor the server did not make, and a cursor of the other order are 422', async () => {
    const task = uniqueTask('cursor-checks');
    await insertExecutions(api.db, Array.from({ length: 3 }, () => ({ task, data: null })));
    const first = await list(`task=${task}&limit=1`);
    const cursor = first.body.next_cursor as string;
    expect(cursor).toEqual(expect.any(String));
    const refusals = await Promise.all([list(`task=${task}&limit=1&cursor=${cursor}&offset=1`), list(`task=${task}&cursor=bm90LWEtY3Vyc29y`), list(`task=${task}&cursor=${cursor}&order=asc`)]);
    expect(refusals.map((r) => [r.status, r.body.error?.details?.[0].path])).toEqual([
      [422, 'query/offset'],
      [422, 'query/cursor'],
      [422, 'query/cursor'],
    ]);
  });
});

describe('walking by cursor', () => {
  /**
   * Executions of one task, some running (listed from another index), and some whose creation
   * instants differ by microseconds within one millisecond, in the reverse order of their ids: a
   * position kept to the millisecond would skip or repeat them.
   */
  async function seed(task: string): Promise<string[]> {
    const created = await insertExecutions(api.db, Array.from({ length: 60 }, (_, i) => ({ task, data: { i } })));
    await claimExecutions(api.db, [task], 9, 60_000);
    const ids = created.map((c) => c.execution.id).sort();
    for (const [i, id] of ids.slice(0, 6).entries()) {
      await queryRows(api.db, 'UPDATE stepwise.executions SET created_at = ?::timestamptz WHERE id = ?', [`2024-01-01T00:00:00.000${900 - i * 100}Z`, id]);
    }
    return ids;
  }

  test.each([
    { order: 'asc', by: 'task' },
    { order: 'desc', by: 'task' },
    { order: 'asc', by: 'status' },
    { order: 'desc', by: 'nothing' },
  ] as const)('returns each execution exactly once while new ones are inserted (order=$order, filtered by $by)', async ({ order, by }) => {
    const task = uniqueTask(`walk-${order}-${by}`);
    const existing = await seed(task);
    const filter = by === 'task' ? `task=${task}` : by === 'status' ? 'status=pending' : '';
    const wanted = by === 'status' ? (await queryRows<{ id: string }>(api.db, "SELECT id FROM stepwise.executions WHERE status = 'pending'")).map((r) => r.id) : by === 'task' ? existing : (await queryRows<{ id: string }>(api.db, 'SELECT id FROM stepwise.executions')).map((r) => r.id);
    const seen: string[] = [];
    const added: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: { status: number; body: Page } = await list(`${filter}&order=${order}&limit=7${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.body.offset).toBe(0);
      seen.push(...page.body.executions.map((e) => e.execution_id));
      // New executions arrive while the walk goes on.
      const [fresh] = await insertExecutions(api.db, [{ task, data: { fresh: pages } }]);
      added.push(fresh.execution.id);
      cursor = page.body.next_cursor;
      pages += 1;
      expect(pages).toBeLessThan(100); // a cursor that skips nothing would walk forever
    } while (cursor !== null);
    expect(pages).toBeGreaterThan(1);
    expect(new Set(seen).size).toBe(seen.length);
    const seenSet = new Set(seen);
    expect(wanted.filter((id) => !seenSet.has(id))).toEqual([]);
    // Oldest first, the walk ends with what was added before its last page; newest first, it never meets them.
    const addedSeen = added.filter((id) => seenSet.has(id));
    expect(addedSeen).toEqual(order === 'asc' ? added.slice(0, -1) : []);
    expect(seen.length).toBe(wanted.length + addedSeen.length);
  });
});
