// PRODUCT.md §6 "Find executions": tags on schedule and in the resource, the key in the resource, and
// the list's filters by tag, key and creation range, with every answer checked against openapi.yaml.
import '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { completeAs, registerTask, uniqueTask } from '../helpers/simulated-worker';
import { schedule } from '../../src/engine/schedule';
import { claimExecutions } from '../../src/store/transitions/claim';
import type { ExecutionStatus } from '../../src/domain/status';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

/** A task registered for this test alone. */
async function freshTask(prefix = 'find'): Promise<string> {
  const task = uniqueTask(prefix);
  await registerTask(api.db, task);
  return task;
}

/** Sets executions' created_at, so that ranges can be asked about known instants. */
async function setCreatedAt(id: string, at: string): Promise<void> {
  await api.db.raw('UPDATE stepwise.executions SET created_at = ?::timestamptz WHERE id = ?', [at, id]);
}

/** Every id of a list, paged through `limit` at a time; checks that each page reports the same total. */
async function listAll(filter: Parameters<TestApi['client']['list']>[0], limit: number): Promise<{ ids: string[]; total: number }> {
  const ids: string[] = [];
  let total = -1;
  for (let offset = 0; ; offset += limit) {
    const page = await api.client.list({ ...filter, limit, offset });
    if (total === -1) total = page.total;
    expect(page.total).toBe(total);
    if (page.executions.length === 0) break;
    ids.push(...page.executions.map((e) => e.execution_id));
  }
  return { ids, total };
}

describe('find executions', () => {
  test('tags given on schedule show on the resource, in the list and in the wait answer, with the idempotency key', async () => {
    const task = await freshTask();
    const key = `find-${task}`;
    const scheduled = await api.client.schedule(task, { n: 1 }, { tags: ['eu', 'vip', 'ünïcödé tag'], idempotencyKey: key });
    expect(scheduled.created).toBe(true);
    const execution = await api.client.get(scheduled.execution_id);
    expect(execution).toMatchObject({ tags: ['eu', 'vip', 'ünïcödé tag'], idempotency_key: key });

    const page = await api.client.list({ task });
    expect(page.executions.map((e) => e.tags)).toEqual([['eu', 'vip', 'ünïcödé tag']]);

    // A repeat with the key finds the first execution, with the tags it was first scheduled with.
    const again = await api.client.schedule(task, { n: 1 }, { tags: ['other'], idempotencyKey: key });
    expect(again).toMatchObject({ execution_id: scheduled.execution_id, created: false });
    expect((await api.client.get(scheduled.execution_id)).tags).toEqual(['eu', 'vip', 'ünïcödé tag']);

    await api.client.cancel(scheduled.execution_id);
    const finished = await api.client.wait(scheduled.execution_id, { timeoutSeconds: 5 });
    expect(finished).toMatchObject({ status: 'cancelled', tags: ['eu', 'vip', 'ünïcödé tag'], idempotency_key: key });
  });

  test('an execution scheduled without tags (or with none) shows tags [] and idempotency_key null', async () => {
    const task = await freshTask();
    const plain = await api.client.schedule(task);
    const empty = await api.client.schedule(task, {}, { tags: [] });
    for (const id of [plain.execution_id, empty.execution_id]) {
      expect(await api.client.get(id)).toMatchObject({ tags: [], idempotency_key: null });
    }
    // None is stored as NULL, never as an empty array, so the tag index holds tagged executions only.
    const { rows } = await api.db.raw('SELECT count(*)::int AS n FROM stepwise.executions WHERE task = ? AND tags IS NULL', [task]);
    expect(rows[0].n).toBe(2);
    expect((await api.client.list({ task })).executions.map((e) => e.tags)).toEqual([[], []]);
  });

  test('tags at the limits are accepted: 20 tags of 64 characters, counted in code points', async () => {
    const task = await freshTask();
    const tags = Array.from({ length: 20 }, (_, i) => `${String(i).padStart(2, '0')}${'😀'.repeat(62)}`);
    const { execution_id } = await api.client.schedule(task, {}, { tags });
    expect((await api.client.get(execution_id)).tags).toEqual(tags);
  });

  test.each([
    ['21 tags', Array.from({ length: 21 }, (_, i) => `t${i}`), 'body/tags'],
    ['an empty tag', ['ok', ''], 'body/tags/1'],
    ['a tag of 65 characters', ['x'.repeat(65)], 'body/tags/0'],
    ['a repeated tag', ['eu', 'eu'], 'body/tags'],
    ['a tag that is not a string', [7], 'body/tags/0'],
    ['tags that are not an array', 'eu', 'body/tags'],
  ])('schedule with %s is 422 invalid_data with details', async (_what, tags, detailPath) => {
    const task = await freshTask();
    const res = await api.call('POST', '/api/v1/executions', {
      body: JSON.stringify({ task, data: {}, tags }),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: expect.arrayContaining([expect.objectContaining({ path: detailPath })]) } });
    expect((await api.client.list({ task })).total).toBe(0);
  });

  test("the SDK's schedule() takes tags as the API does, and throws TypeError for bad ones before writing", async () => {
    const task = await freshTask();
    const scheduled = await schedule(api.db, task, {}, { tags: ['sdk', 'batch-7'], idempotencyKey: `sdk-${task}` });
    expect(await api.client.get(scheduled.executionId)).toMatchObject({ tags: ['sdk', 'batch-7'], idempotency_key: `sdk-${task}` });
    expect((await api.client.list({ tag: ['batch-7'], task })).executions.map((e) => e.execution_id)).toEqual([scheduled.executionId]);

    const bad: unknown[] = [Array.from({ length: 21 }, (_, i) => `t${i}`), [''], ['x'.repeat(65)], ['a', 'a'], [1], 'a', ['\u0000']];
    for (const tags of bad) {
      await expect(schedule(api.db, task, {}, { tags: tags as string[] })).rejects.toThrow(TypeError);
    }
    expect((await api.client.list({ task })).total).toBe(1);
  });

  test('list by one tag, and by several: an execution must carry every tag asked for', async () => {
    const task = await freshTask();
    const tenant = `tenant-${task}`;
    const a = await api.client.schedule(task, {}, { tags: [tenant, 'eu'] });
    const b = await api.client.schedule(task, {}, { tags: ['eu', tenant, 'vip'] });
    await api.client.schedule(task, {}, { tags: ['eu', 'vip'] });
    await api.client.schedule(task);

    const one = await api.client.list({ tag: [tenant], order: 'asc' });
    expect(one.executions.map((e) => e.execution_id)).toEqual([a.execution_id, b.execution_id]);
    expect(one.total).toBe(2);
    const both = await api.client.list({ tag: [tenant, 'vip'] });
    expect(both.executions.map((e) => e.execution_id)).toEqual([b.execution_id]);
    expect(both.total).toBe(1);
    // The repeated parameter on the wire, as the contract writes it (form, exploded).
    const raw = await api.call('GET', `/api/v1/executions?tag=vip&tag=${encodeURIComponent(tenant)}`);
    expect(raw.body).toMatchObject({ total: 1, executions: [{ execution_id: b.execution_id }] });
    expect((await api.client.list({ tag: [tenant, 'nobody-has-this'] })).total).toBe(0);
  });

  test('list by idempotency_key finds the one execution that holds it', async () => {
    const task = await freshTask();
    const key = `order-${task}`;
    const held = await api.client.schedule(task, {}, { idempotencyKey: key });
    await api.client.schedule(task, {}, { idempotencyKey: `${key}-other` });
    const page = await api.client.list({ idempotency_key: key });
    expect(page).toMatchObject({ total: 1, executions: [{ execution_id: held.execution_id, task }] });
    expect((await api.client.list({ idempotency_key: key, status: 'completed' })).total).toBe(0);
    expect((await api.client.list({ idempotency_key: `${key}-missing` })).total).toBe(0);
  });

  test('list by creation range: created_after is inclusive, created_before exclusive, to the millisecond', async () => {
    const task = await freshTask();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { execution_id } = await api.client.schedule(task, { i });
      await setCreatedAt(execution_id, `2021-03-0${i + 1}T12:00:00.000Z`);
      ids.push(execution_id);
    }
    const range = await api.client.list({ task, created_after: '2021-03-02T12:00:00.000Z', created_before: '2021-03-04T12:00:00.000Z', order: 'asc' });
    expect(range.executions.map((e) => e.execution_id)).toEqual([ids[1], ids[2]]);
    expect(range.total).toBe(2);
    // One millisecond on either side moves each end by one execution.
    const wider = await api.client.list({ task, created_after: '2021-03-02T11:59:59.999Z', created_before: '2021-03-04T12:00:00.001Z' });
    expect(wider.total).toBe(3);
    const narrower = await api.client.list({ task, created_after: '2021-03-02T12:00:00.001Z' });
    expect(narrower.total).toBe(3);
    expect((await api.client.list({ task, created_before: '2021-03-02T12:00:00Z' })).total).toBe(1);
    // Offsets are instants too: 13:00+01:00 is 12:00Z (a `+` in a URL is written %2B).
    const zoned = await api.call('GET', `/api/v1/executions?task=${task}&created_after=${encodeURIComponent('2021-03-05T13:00:00+01:00')}`);
    expect(zoned.body).toMatchObject({ total: 1, executions: [{ execution_id: ids[4] }] });
  });

  test('filters combine with status, task and paging, running executions included, and total counts the filtered set', async () => {
    const tasks = [await freshTask('mix'), await freshTask('mix')];
    const tag = `batch-${tasks[0]}`;
    const made: Array<{ id: string; task: string; tags: string[]; at: string }> = [];
    for (let i = 0; i < 18; i++) {
      const task = tasks[i % 2];
      const tags = i % 3 === 0 ? [tag] : i % 3 === 1 ? [tag, 'eu'] : ['eu'];
      const { execution_id } = await api.client.schedule(task, { i }, { tags });
      // Two executions per instant, so that ties are broken by id within the filters too.
      made.push({ id: execution_id, task, tags, at: new Date(Date.UTC(2022, 0, 1, 0, Math.floor(i / 2))).toISOString() });
      if (i === 5) {
        // The first six run (read through the running index), and every third of them completes.
        const claimed = await claimExecutions(api.db, tasks, 100, 30000);
        expect(claimed).toHaveLength(6);
        for (const c of claimed) {
          if (made.findIndex((m) => m.id === c.execution.id) % 3 === 0) await completeAs(api.db, { id: c.execution.id, token: c.execution.leaseToken as string }, null);
        }
      }
    }
    for (const m of made) await setCreatedAt(m.id, m.at);
    const statuses = new Map<string, ExecutionStatus>();
    for (const m of made) statuses.set(m.id, (await api.client.get(m.id)).status);
    expect(new Set(statuses.values())).toEqual(new Set(['running', 'completed', 'pending']));

    const cases: Array<{ filter: Parameters<TestApi['client']['list']>[0]; keep: (m: (typeof made)[number]) => boolean }> = [
      { filter: { tag: [tag] }, keep: (m) => m.tags.includes(tag) },
      { filter: { tag: [tag, 'eu'] }, keep: (m) => m.tags.includes(tag) && m.tags.includes('eu') },
      { filter: { tag: [tag], task: tasks[1] }, keep: (m) => m.tags.includes(tag) && m.task === tasks[1] },
      { filter: { tag: ['eu'], task: tasks[0], status: 'running' }, keep: (m) => m.tags.includes('eu') && m.task === tasks[0] && statuses.get(m.id) === 'running' },
      { filter: { tag: [tag], status: 'pending' }, keep: (m) => m.tags.includes(tag) && statuses.get(m.id) === 'pending' },
      {
        filter: { tag: ['eu'], task: tasks[0], created_after: '2022-01-01T00:01:00Z', created_before: '2022-01-01T00:07:00Z' },
        keep: (m) => m.tags.includes('eu') && m.task === tasks[0] && m.at >= '2022-01-01T00:01:00.000Z' && m.at < '2022-01-01T00:07:00.000Z',
      },
      {
        filter: { task: tasks[1], status: 'completed', created_after: '2022-01-01T00:00:00Z', created_before: '2022-01-01T00:09:00Z' },
        keep: (m) => m.task === tasks[1] && statuses.get(m.id) === 'completed',
      },
    ];
    for (const { filter, keep } of cases) {
      for (const order of ['asc', 'desc'] as const) {
        const want = made
          .filter(keep)
          .sort((x, y) => (x.at === y.at ? (x.id < y.id ? -1 : 1) : x.at < y.at ? -1 : 1))
          .map((m) => m.id);
        if (order === 'desc') want.reverse();
        const got = await listAll({ ...filter, order }, 2);
        expect({ filter, order, ...got }).toEqual({ filter, order, ids: want, total: want.length });
      }
    }
    expect(cases.every((c) => made.some(c.keep))).toBe(true);
  });

  test.each([
    ['?created_after=yesterday', 'query/created_after'],
    ['?created_after=2024-01-01T00:00:00', 'query/created_after'],
    ['?created_before=2024-02-30T00:00:00Z', 'query/created_before'],
    ['?created_after=2024-01-01T00:00:00+01:00', 'query/created_after'],
    [`?created_after=${encodeURIComponent('0000-01-01T00:30:00+01:00')}`, 'query/created_after'],
    ['?tag=', 'query/tag/0'],
    [`?tag=${'x'.repeat(65)}`, 'query/tag/0'],
    [`?${Array.from({ length: 21 }, (_, i) => `tag=t${i}`).join('&')}`, 'query/tag'],
    ['?idempotency_key=', 'query/idempotency_key'],
    ['?tags=eu', 'query/tags'],
  ])('list with %s is 422 invalid_data naming the parameter', async (query, detailPath) => {
    const res = await api.call('GET', `/api/v1/executions${query}`);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: detailPath }] } });
  });
});
