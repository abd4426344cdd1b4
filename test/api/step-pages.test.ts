// GET /executions/{id}/steps in pages (issue #33): a history of large results reads back in pages of
// a bounded size, by seq, and a page that fails answers the error envelope, as the access log says.
import { insertExecutions } from '../../src/store/executions';
import { queryRows } from '../../src/store/db';
import { startTestApi, type TestApi } from '../helpers/api-server';

let api: TestApi;

beforeAll(async () => {
  // Debug: the access log writes a line for every request.
  api = await startTestApi({ logLevel: 'debug' });
});
afterAll(async () => {
  await api.close();
});

/** An execution with `count` completed steps whose results are strings of `bytes` characters (made in the database). */
async function executionWithSteps(count: number, bytes: number): Promise<string> {
  const [{ execution }] = await insertExecutions(api.db, [{ task: 'paged', data: {} }]);
  await queryRows(
    api.db,
    `INSERT INTO stepwise.steps (execution_id, seq, name, kind, completed, result, started_at, completed_at)
     SELECT ?, n, 'step-' || n, 'step', true, to_jsonb(repeat(chr(97 + n % 26), ?)), now(), now() FROM generate_series(0, ? - 1) n`,
    [execution.id, bytes, count],
  );
  return execution.id;
}

/** The access log's line for one request id. */
function accessLogLine(requestId: string): Record<string, unknown> | undefined {
  return api.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.requestId === requestId && l.msg === 'request completed');
}

const MIB = 1024 * 1024;

describe('steps in pages', () => {
  test('twelve steps of 3.5 MB read back page by page, each page a few MiB, in order and complete', async () => {
    const id = await executionWithSteps(12, 3_500_000);
    const seqs: number[] = [];
    let after: string = '';
    let pages = 0;
    for (;;) {
      const res = await api.call('GET', `/api/v1/executions/${id}/steps${after}`);
      expect(res.status).toBe(200);
      // A page ends once its results pass 4 MiB: the step that passes it is its last.
      expect(res.text.length).toBeLessThan(9 * MIB);
      const page = res.body as { items: Array<{ seq: number; result: string }>; limit: number; next_after_seq: number | null };
      expect(page.limit).toBe(100);
      expect(page.items.length).toBeGreaterThan(0);
      expect(page.items.length).toBeLessThanOrEqual(2);
      for (const step of page.items) expect(step.result).toHaveLength(3_500_000);
      seqs.push(...page.items.map((s) => s.seq));
      pages += 1;
      if (page.next_after_seq === null) break;
      expect(page.next_after_seq).toBe(page.items[page.items.length - 1].seq);
      after = `?after_seq=${page.next_after_seq}`;
    }
    expect(pages).toBe(6);
    expect(seqs).toEqual([...Array(12).keys()]);
  });

  test('limit bounds a page by count and is clamped to 1000; a deep page starts where after_seq says', async () => {
    const id = await executionWithSteps(30, 10);
    const first = await api.client.listStepPage(id, { limit: 7 });
    expect(first.items.map((s) => s.seq)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(first).toMatchObject({ limit: 7, next_after_seq: 6 });
    const deep = await api.client.listStepPage(id, { afterSeq: 25, limit: 5000 });
    expect(deep.items.map((s) => s.seq)).toEqual([26, 27, 28, 29]);
    expect(deep).toMatchObject({ limit: 1000, next_after_seq: null });
    const exact = await api.client.listStepPage(id, { afterSeq: 19, limit: 10 });
    expect(exact.items.map((s) => s.seq)).toEqual([20, 21, 22, 23, 24, 25, 26, 27, 28, 29]);
    expect(exact.next_after_seq).toBeNull();
    expect(await api.client.listStepPage(id, { afterSeq: 29 })).toEqual({ items: [], limit: 100, next_after_seq: null });
    // The client and the CLI read every page.
    expect((await api.client.listSteps(id)).map((s) => s.seq)).toEqual([...Array(30).keys()]);
  });

  test('an execution without steps has one empty page; after_seq below 0 is invalid data; an unknown execution is 404', async () => {
    const id = await executionWithSteps(0, 1);
    expect(await api.client.listStepPage(id)).toEqual({ items: [], limit: 100, next_after_seq: null });
    const negative = await api.call('GET', `/api/v1/executions/${id}/steps?after_seq=-1`);
    expect(negative.status).toBe(422);
    const unknown = await api.call('GET', '/api/v1/executions/0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10/steps');
    expect(unknown.status).toBe(404);
  });

  test('a page that fails answers the error envelope, and the access log records the 500 it sent', async () => {
    const id = await executionWithSteps(3, 10);
    // A failed attempt whose instants cannot be read: shaping the page throws.
    await queryRows(api.db, `UPDATE stepwise.steps SET failures = '[{"attempt": 1, "error": {}, "started_at": "never", "ended_at": "never"}]' WHERE execution_id = ? AND seq = 1`, [id]);
    const res = await api.call('GET', `/api/v1/executions/${id}/steps`);
    expect(res.status).toBe(500);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({ error: { code: 'internal_error', message: 'an internal error occurred' } });
    expect(accessLogLine(res.headers.get('x-request-id') as string)).toMatchObject({ status: 500, route: '/api/v1/executions/:id/steps' });
  });
});
