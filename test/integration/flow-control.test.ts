// Flow control (PRODUCT.md §8): priorities, keyed concurrency, rate limits and debounce, through the
// store's claims, the API and a real worker.
import { defineTask, schedule, Type } from '../../src/index';
import { Registry } from 'prom-client';
import { parseFlow, type FlowOptions, type FlowPolicy } from '../../src/domain/flow';
import { queryRows } from '../../src/store/db';
import { insertExecutions, type NewExecution } from '../../src/store/executions';
import { rekeyExecutions, upsertTasks } from '../../src/store/tasks';
import { claimExecutions, type ClaimedExecution } from '../../src/store/transitions/claim';
import { claimThrottledExecutions } from '../../src/store/transitions/claim-throttled';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { uniqueTask } from '../helpers/simulated-worker';
import { startWorker } from '../helpers/worker';
import { waitUntil } from '../helpers/wait-until';
import { observeWorker } from '../../src/worker-metrics';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

/** Registers `task` with the given flow control, as a worker would. */
async function register(task: string, flow: FlowOptions): Promise<FlowPolicy> {
  const policy = parseFlow(task, flow);
  await upsertTasks(api.db, [{ name: task, dataSchema: null, eventSchemas: {}, retry: null, flow: policy }]);
  return policy;
}

const dataOf = (claimed: ClaimedExecution[]) => claimed.map((c) => c.execution.data as Record<string, unknown>);
const tenantsOf = (claimed: ClaimedExecution[]) => dataOf(claimed).map((d) => d.tenant);

/** Inserts one at a time, so that due order is insertion order. */
async function insertInOrder(items: NewExecution[]): Promise<void> {
  for (const item of items) await insertExecutions(api.db, [item]);
}

describe('defineTask flow options', () => {
  const run = async () => null;
  test.each([
    [{ concurrency: { limit: 2, key: 'tenant' } }, "task t: concurrency.key must be a JSON Pointer into data such as '/tenantId', not \"tenant\""],
    [{ concurrency: { limit: 2, key: '' } }, 'task t: concurrency.key must be a JSON Pointer'],
    [{ rateLimit: { limit: 0, period: '1s' } }, 'task t: rateLimit.limit must be a whole number from 1 to 1,000,000, not 0'],
    [{ rateLimit: { limit: 5, period: 'soon' } }, 'task t: rateLimit.period "soon" is not a valid duration'],
    [{ rateLimit: { limit: 5, period: '2d' } }, 'task t: rateLimit.period must be from 1 ms to 1 day, not "2d"'],
    [{ rateLimit: { limit: 5 } }, "task t: rateLimit.period must be a duration such as '1m' or 60000, not undefined"],
    [{ debounce: { period: -1 } }, 'task t: debounce.period -1 is not a valid duration'],
    [{ debounce: 5 }, 'task t: debounce must be { period, key? }'],
  ])('%j is refused', (flow, message) => {
    expect(() => defineTask({ name: 't', run, ...(flow as object) })).toThrow(message);
  });

  test('a pointer with escapes reads the key it names', () => {
    expect(parseFlow('t', { concurrency: { limit: 1, key: '/a~1b/c~0d' } }).concurrency?.key?.path).toEqual(['a/b', 'c~d']);
  });
});

describe('priority', () => {
  test('a claim takes higher priority first, then due order; the resource and the list show it', async () => {
    const task = uniqueTask('prio');
    await register(task, {});
    await insertInOrder([
      { task, data: { n: 'low-1' }, priority: -5 },
      { task, data: { n: 'mid-1' } },
      { task, data: { n: 'high-1' }, priority: 10 },
      { task, data: { n: 'mid-2' } },
      { task, data: { n: 'high-2' }, priority: 10 },
    ]);
    const order: unknown[] = [];
    for (let i = 0; i < 5; i++) order.push(...dataOf(await claimExecutions(api.db, [task], 1, 30_000)).map((d) => d.n));
    expect(order).toEqual(['high-1', 'high-2', 'mid-1', 'mid-2', 'low-1']);

    const scheduled = await api.client.schedule(task, { n: 'api' }, { priority: 7 });
    expect((await api.client.get(scheduled.execution_id)).priority).toBe(7);
    const listed = await api.client.list({ task });
    expect(listed.executions.find((e) => e.execution_id === scheduled.execution_id)?.priority).toBe(7);
    expect(listed.executions.filter((e) => e.execution_id !== scheduled.execution_id).map((e) => e.priority).sort()).toEqual([-5, 0, 0, 10, 10]);
  });

  test('a priority outside -1,000,000..1,000,000 or not whole answers 422 invalid_data', async () => {
    const task = uniqueTask('prio');
    await register(task, {});
    for (const priority of [1_000_001, -1_000_001, 1.5, '3']) {
      const res = await api.call('POST', '/api/v1/executions', { body: JSON.stringify({ task, data: {}, priority }), headers: { 'content-type': 'application/json' } });
      expect(res.status).toBe(422);
      expect((res.body as { error: { code: string; details: Array<{ path: string }> } }).error).toMatchObject({ code: 'invalid_data', details: [{ path: 'body/priority' }] });
    }
  });
});

describe('keyed concurrency', () => {
  test('the limit holds per key value; keys take turns, so one backlog does not starve another key', async () => {
    const task = uniqueTask('keyed');
    const policy = await register(task, { concurrency: { limit: 2, key: '/tenant' } });
    // Tenant a's backlog of 30 comes first; b and c schedule after it.
    await insertExecutions(api.db, Array.from({ length: 30 }, (_, i) => ({ task, data: { tenant: 'a', i } })));
    await insertInOrder([{ task, data: { tenant: 'b' } }, { task, data: { tenant: 'c', i: 1 } }, { task, data: { tenant: 'c', i: 2 } }, { task, data: { tenant: 'c', i: 3 } }]);

    const first = await claimThrottledExecutions(api.db, task, policy, 3, 30_000, null, '');
    // One of each key in turn, not three of a's.
    expect(tenantsOf(first.claimed).sort()).toEqual(['a', 'b', 'c']);
    const second = await claimThrottledExecutions(api.db, task, policy, 10, 30_000, null, first.cursor);
    // a and c have one place left each; b has nothing more to run.
    expect(tenantsOf(second.claimed).sort()).toEqual(['a', 'c']);
    expect(second.heldBy).toBe('concurrency');
    const third = await claimThrottledExecutions(api.db, task, policy, 10, 30_000, null, second.cursor);
    expect(third.claimed).toEqual([]);
    expect(third.heldBy).toBe('concurrency');

    const running = await queryRows<{ key: string; n: number }>(
      api.db,
      "SELECT concurrency_key AS key, count(*)::int AS n FROM stepwise.executions WHERE task = ? AND status = 'running' GROUP BY 1 ORDER BY 1",
      [task],
    );
    expect(running).toEqual([
      { key: 'a', n: 2 },
      { key: 'b', n: 1 },
      { key: 'c', n: 2 },
    ]);
  });

  test('data without a value at the pointer shares the key "" and its limit; numbers and strings key alike', async () => {
    const task = uniqueTask('keyed');
    const policy = await register(task, { concurrency: { limit: 1, key: '/tenant' } });
    await insertInOrder([{ task, data: {} }, { task, data: { other: 1 } }, { task, data: { tenant: 7 } }, { task, data: { tenant: '7' } }]);
    const claimed = await claimThrottledExecutions(api.db, task, policy, 10, 30_000, null, '');
    expect(claimed.claimed).toHaveLength(2);
    const keys = await queryRows<{ key: string }>(api.db, 'SELECT concurrency_key AS key FROM stepwise.executions WHERE task = ? ORDER BY created_at', [task]);
    expect(keys.map((k) => k.key)).toEqual(['', '', '7', '7']);
  });

  test('an expired lease is taken over within its key limit, even when its key has nothing else due', async () => {
    const task = uniqueTask('keyed');
    const policy = await register(task, { concurrency: { limit: 1, key: '/tenant' } });
    await insertExecutions(api.db, [{ task, data: { tenant: 'x' } }]);
    const [held] = (await claimThrottledExecutions(api.db, task, policy, 5, 30_000, null, '')).claimed;
    await queryRows(api.db, "UPDATE stepwise.executions SET due_at = now() - interval '1 second' WHERE id = ?", [held.execution.id]);
    const again = await claimThrottledExecutions(api.db, task, policy, 5, 30_000, null, 'x');
    expect(again.claimed.map((c) => [c.execution.id, c.previousStatus])).toEqual([[held.execution.id, 'running']]);
  });

  test('a worker restarted with a key applies it to the backlog scheduled before', async () => {
    const task = uniqueTask('rekey');
    await register(task, {});
    await insertExecutions(api.db, [{ task, data: { tenant: 'a' } }, { task, data: { tenant: 'b' } }]);
    await register(task, { concurrency: { limit: 1, key: '/tenant' } });
    const keys = await queryRows<{ key: string }>(api.db, 'SELECT concurrency_key AS key FROM stepwise.executions WHERE task = ? ORDER BY 1', [task]);
    expect(keys.map((k) => k.key)).toEqual(['a', 'b']);
    await register(task, {});
    const cleared = await queryRows<{ key: string | null }>(api.db, 'SELECT concurrency_key AS key FROM stepwise.executions WHERE task = ?', [task]);
    expect(cleared.map((k) => k.key)).toEqual([null, null]);
  });

  test('an execution inserted with the old keys while the keys changed is keyed by the second pass', async () => {
    const task = uniqueTask('rekey');
    const policy = await register(task, { concurrency: { limit: 1, key: '/tenant' } });
    await insertExecutions(api.db, [{ task, data: { tenant: 'late' } }]);
    // As if its INSERT had read the task's row before the key was registered.
    await queryRows(api.db, 'UPDATE stepwise.executions SET concurrency_key = NULL WHERE task = ?', [task]);
    expect((await claimThrottledExecutions(api.db, task, policy, 5, 30_000, null, '')).claimed).toEqual([]);
    await rekeyExecutions(api.db, [task]);
    expect(tenantsOf((await claimThrottledExecutions(api.db, task, policy, 5, 30_000, null, '')).claimed)).toEqual(['late']);
  });

  test('beyond the free slots, a key gives only what leaves half its room to other workers', async () => {
    const task = uniqueTask('keyed');
    const policy = await register(task, { concurrency: { limit: 5, key: '/tenant' } });
    await insertExecutions(api.db, ['a', 'b', 'c'].flatMap((tenant) => Array.from({ length: 10 }, (_, i) => ({ task, data: { tenant, i } }))));
    // Room for 20, of which 2 start at once: every key gives (5 - 1) / 2 = 2, not its whole room of 5.
    const claim = await claimThrottledExecutions(api.db, task, policy, 20, 30_000, null, '', 2);
    expect(tenantsOf(claim.claimed).sort()).toEqual(['a', 'a', 'b', 'b', 'c', 'c']);
    // A limit of 2 gives nothing ahead of the free slots.
    const small = uniqueTask('keyed');
    const smallPolicy = await register(small, { concurrency: { limit: 2, key: '/tenant' } });
    await insertExecutions(api.db, ['a', 'b', 'c'].map((tenant) => ({ task: small, data: { tenant } })));
    expect((await claimThrottledExecutions(api.db, small, smallPolicy, 20, 30_000, null, '', 1)).claimed).toHaveLength(1);
  });

  test('a claim while another worker holds the task\'s lock takes nothing and says so', async () => {
    const task = uniqueTask('keyed');
    const policy = await register(task, { concurrency: { limit: 5, key: '/tenant' } });
    await insertExecutions(api.db, [{ task, data: { tenant: 'a' } }]);
    await api.db.transaction(async (trx) => {
      await trx.raw("SELECT pg_advisory_xact_lock(hashtextextended('stepwise.limit:' || ?, 0))", [task]);
      const claim = await claimThrottledExecutions(api.db, task, policy, 5, 30_000, null, '');
      expect(claim).toMatchObject({ claimed: [], contended: true });
    });
    expect(await claimThrottledExecutions(api.db, task, policy, 5, 30_000, null, '')).toMatchObject({ contended: false, claimed: [expect.anything()] });
  });

  test('completions recorded with a claim free their places for that very claim, in one commit', async () => {
    const task = uniqueTask('keyed');
    const policy = await register(task, { concurrency: { limit: 1, key: '/tenant' } });
    await insertInOrder([{ task, data: { tenant: 'a', i: 1 } }, { task, data: { tenant: 'a', i: 2 } }]);
    const [first] = (await claimThrottledExecutions(api.db, task, policy, 5, 30_000, null, '')).claimed;
    const completion = { id: first.execution.id, token: first.execution.leaseToken as string, output: { done: 1 } };
    const stale = { id: first.execution.id, token: '00000000-0000-4000-8000-000000000000', output: null };
    const next = await claimThrottledExecutions(api.db, task, policy, 5, 30_000, null, 'a', 5, [completion, stale]);
    await next.committed;
    expect(next.completed).toEqual(new Set([first.execution.id]));
    expect(dataOf(next.claimed)).toEqual([{ tenant: 'a', i: 2 }]);
    expect(await api.client.get(first.execution.id)).toMatchObject({ status: 'completed', output: { done: 1 } });
  });

  test('a paused keyed task is not claimed', async () => {
    const task = uniqueTask('keyed');
    const policy = await register(task, { concurrency: { limit: 3, key: '/tenant' } });
    await insertExecutions(api.db, [{ task, data: { tenant: 'a' } }]);
    await queryRows(api.db, 'UPDATE stepwise.tasks SET paused = true WHERE name = ?', [task]);
    expect((await claimThrottledExecutions(api.db, task, policy, 5, 30_000, null, '')).claimed).toEqual([]);
  });
});

describe('rate limit', () => {
  test('no more than `limit` starts in any window of the period; the window slides', async () => {
    const task = uniqueTask('rated');
    const policy = await register(task, { rateLimit: { limit: 3, period: 1500 } });
    await insertExecutions(api.db, Array.from({ length: 8 }, (_, i) => ({ task, data: { i } })));
    const stamps = async () =>
      (await queryRows<{ at: number }>(api.db, 'SELECT extract(epoch FROM started_at)::float8 * 1000 AS at FROM stepwise.rate_starts WHERE task = ? ORDER BY started_at', [task])).map((r) => r.at);
    const first = await claimThrottledExecutions(api.db, task, policy, 10, 30_000, null, '');
    expect(first.claimed).toHaveLength(3);
    const firstStamps = await stamps();
    expect(firstStamps).toHaveLength(3);
    const none = await claimThrottledExecutions(api.db, task, policy, 10, 30_000, null, first.cursor);
    expect(none.claimed).toEqual([]);
    expect(none.heldBy).toBe('rate');
    // Once the first starts leave the window, three more start, not before.
    await waitUntil(async () => (await claimThrottledExecutions(api.db, task, policy, 10, 30_000, null, '')).claimed.length > 0, 'the window to slide', 5000, 50);
    const more = await claimThrottledExecutions(api.db, task, policy, 10, 30_000, null, '');
    const secondStamps = await stamps();
    // The claim forgot the starts that left the window: the log holds the window's only.
    expect(secondStamps).toHaveLength(3);
    expect(Math.min(...secondStamps) - Math.max(...firstStamps)).toBeGreaterThanOrEqual(1500);
    expect(more.heldBy).toBe('rate');
    // Each attempt starts at the instant its claim stamped its start with.
    const attempts = await queryRows<{ at: number }>(
      api.db,
      "SELECT extract(epoch FROM attempt_started_at)::float8 * 1000 AS at FROM stepwise.executions WHERE task = ? AND status = 'running' ORDER BY attempt_started_at",
      [task],
    );
    expect(attempts).toHaveLength(6);
    expect(attempts.map((a) => a.at)).toEqual([...firstStamps, ...secondStamps]);
  });

  test('keyed: each key value has its own window; a resume after a sleep is no start', async () => {
    const task = uniqueTask('rated');
    const policy = await register(task, { rateLimit: { limit: 1, period: '1h', key: '/tenant' } });
    await insertInOrder([{ task, data: { tenant: 'a', i: 1 } }, { task, data: { tenant: 'a', i: 2 } }, { task, data: { tenant: 'b', i: 1 } }]);
    const first = await claimThrottledExecutions(api.db, task, policy, 10, 30_000, null, '');
    expect(dataOf(first.claimed).map((d) => `${d.tenant}${d.i}`).sort()).toEqual(['a1', 'b1']);
    // a1 sleeps (waiting, due now): it resumes although a's window is full.
    const a1 = first.claimed.find((c) => (c.execution.data as { tenant: string }).tenant === 'a');
    await queryRows(api.db, "UPDATE stepwise.executions SET status = 'waiting', due_at = now(), lease_token = NULL WHERE id = ?", [a1?.execution.id]);
    const second = await claimThrottledExecutions(api.db, task, policy, 10, 30_000, null, first.cursor);
    expect(second.claimed.map((c) => [c.execution.id, c.previousStatus])).toEqual([[a1?.execution.id, 'waiting']]);
    expect(second.heldBy).toBe('rate');
  });

  test('a keyed concurrency limit and an unkeyed rate limit hold together', async () => {
    const task = uniqueTask('both');
    const policy = await register(task, { concurrency: { limit: 1, key: '/tenant' }, rateLimit: { limit: 2, period: '1h' } });
    await insertExecutions(api.db, ['a', 'a', 'b', 'c'].map((tenant) => ({ task, data: { tenant } })));
    const claimed = await claimThrottledExecutions(api.db, task, policy, 10, 30_000, null, '');
    expect(claimed.claimed).toHaveLength(2);
    expect(new Set(tenantsOf(claimed.claimed)).size).toBe(2);
  });
});

describe('debounce', () => {
  const debounced = defineTask({
    name: uniqueTask('debounced'),
    data: Type.Object({ user: Type.String(), n: Type.Integer() }),
    debounce: { period: '1h', key: '/user' },
    async run() {
      return null;
    },
  });

  beforeAll(async () => {
    await register(debounced.name, { debounce: debounced.debounce });
  });

  test('a schedule within the period replaces the pending execution\'s data and pushes its start: 200 naming it, debounced', async () => {
    const first = await api.call('POST', '/api/v1/executions', { body: JSON.stringify({ task: debounced.name, data: { user: 'u1', n: 1 } }), headers: { 'content-type': 'application/json' } });
    expect(first.status).toBe(201);
    const created = first.body as { execution_id: string; debounced: boolean };
    expect(created.debounced).toBe(false);
    const [before] = await queryRows<{ due: number }>(api.db, 'SELECT extract(epoch FROM due_at)::float8 * 1000 AS due FROM stepwise.executions WHERE id = ?', [created.execution_id]);
    expect(before.due).toBeGreaterThan(Date.now() + 3500_000);

    const second = await api.call('POST', '/api/v1/executions', { body: JSON.stringify({ task: debounced.name, data: { user: 'u1', n: 2 }, priority: 3 }), headers: { 'content-type': 'application/json' } });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ execution_id: created.execution_id, status: 'pending', debounced: true });
    const execution = await api.client.get(created.execution_id);
    expect(execution).toMatchObject({ data: { user: 'u1', n: 2 }, priority: 3 });
    const [after] = await queryRows<{ due: number }>(api.db, 'SELECT extract(epoch FROM due_at)::float8 * 1000 AS due FROM stepwise.executions WHERE id = ?', [created.execution_id]);
    expect(after.due).toBeGreaterThan(before.due);

    // Another key debounces apart.
    const other = await api.client.schedule(debounced.name, { user: 'u2', n: 1 });
    expect(other).toMatchObject({ created: true, debounced: false });
    expect(other.execution_id).not.toBe(created.execution_id);
  });

  test('twenty concurrent schedules of one key leave one execution, with one of their data', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, (_, n) => api.client.schedule(debounced.name, { user: 'race', n })));
    expect(new Set(results.map((r) => r.execution_id)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const rows = await queryRows<{ n: number }>(api.db, "SELECT (data->>'n')::int AS n FROM stepwise.executions WHERE task = ? AND data->>'user' = 'race'", [debounced.name]);
    expect(rows).toHaveLength(1);
  });

  test('once claimed (or cancelled) the execution takes no more schedules: the next one makes a new execution', async () => {
    const first = await api.client.schedule(debounced.name, { user: 'u3', n: 1 });
    await queryRows(api.db, 'UPDATE stepwise.executions SET due_at = now() WHERE id = ?', [first.execution_id]);
    const [claimed] = await claimExecutions(api.db, [debounced.name], 1, 30_000);
    expect(claimed.execution.id).toBe(first.execution_id);
    const next = await api.client.schedule(debounced.name, { user: 'u3', n: 2 });
    expect(next).toMatchObject({ created: true, debounced: false });
    expect(next.execution_id).not.toBe(first.execution_id);
    await api.client.cancel(next.execution_id);
    const third = await api.client.schedule(debounced.name, { user: 'u3', n: 3 });
    expect(third.execution_id).not.toBe(next.execution_id);
  });

  test('with an idempotency key, a repeat finds its execution; SDK schedule() debounces too', async () => {
    const keyed = await api.client.schedule(debounced.name, { user: 'u4', n: 1 }, { idempotencyKey: `${debounced.name}-u4` });
    const repeat = await api.client.schedule(debounced.name, { user: 'u4', n: 9 }, { idempotencyKey: `${debounced.name}-u4` });
    expect(repeat).toMatchObject({ execution_id: keyed.execution_id, created: false });
    const sdk = await schedule(api.db, debounced, { user: 'u4', n: 2 });
    expect(sdk).toMatchObject({ executionId: keyed.execution_id, created: false, debounced: true });
    const byName = await schedule(api.db, debounced.name, { user: 'u4', n: 3 }, { priority: 2 });
    expect(byName).toMatchObject({ executionId: keyed.execution_id, debounced: true });
    expect(await api.client.get(keyed.execution_id)).toMatchObject({ data: { user: 'u4', n: 3 }, priority: 2, idempotency_key: `${debounced.name}-u4` });
  });
});

describe('GET /tasks and a real worker', () => {
  test('shows each task\'s limits and, per key, what runs and waits; a worker runs every key within its limit', async () => {
    const name = uniqueTask('tenants');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const task = defineTask({
      name,
      data: Type.Object({ tenant: Type.String() }),
      concurrency: { limit: 1, key: '/tenant' },
      rateLimit: { limit: 100, period: '1m', key: '/tenant' },
      async run() {
        await gate;
        return null;
      },
    });
    const registry = new Registry();
    const worker = await startWorker(api.t, [task], { concurrency: 8, observer: observeWorker(registry) });
    try {
      for (const tenant of ['a', 'a', 'a', 'b']) await api.client.schedule(name, { tenant });
      await waitUntil(async () => (await queryRows<{ n: number }>(api.db, "SELECT count(*)::int AS n FROM stepwise.executions WHERE task = ? AND status = 'running'", [name]))[0].n === 2);
      const { data } = await api.client.raw.GET('/api/v1/tasks');
      const shown = data?.items.find((t) => t.name === name);
      expect(shown).toMatchObject({
        concurrency_limit: 1,
        concurrency: { limit: 1, key: '/tenant' },
        rate_limit: { limit: 100, period_ms: 60_000, key: '/tenant' },
        debounce: null,
        keys: [
          { key: 'a', running: 1, waiting: 2, started_in_window: 1 },
          { key: 'b', running: 1, waiting: 0, started_in_window: 1 },
        ],
      });
      // a's two others were due while the worker had room: its claims count as throttled by concurrency.
      const throttled = (await registry.getSingleMetric('stepwise_claims_throttled_total')?.get())?.values ?? [];
      expect(throttled.find((v) => v.labels.task === name && v.labels.limit === 'concurrency')?.value).toBeGreaterThan(0);
      release();
      await waitUntil(async () => (await queryRows<{ n: number }>(api.db, "SELECT count(*)::int AS n FROM stepwise.executions WHERE task = ? AND status = 'completed'", [name]))[0].n === 4);
    } finally {
      release();
      await worker.stop();
    }
  });
});
