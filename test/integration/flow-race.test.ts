// Flow control raced by three real worker processes (test/fixtures/flow-race-tasks.ts): a keyed
// concurrency limit holds per key over all of them and keys take turns, so one tenant's backlog
// starves no other; a rate limit, keyed or not, holds exactly over all of them, and is not a crawl.
import { insertExecutions } from '../../src/store/executions';
import { queryRows } from '../../src/store/db';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { spawnTsx, type TestProcess } from '../helpers/processes';
import { waitUntil } from '../helpers/wait-until';

const FIXTURE = 'test/fixtures/flow-race-tasks.ts';
/** What the test expects of the fixture's tasks (written apart from it: a drifted fixture fails). */
const KEYED = { task: 'flow-race.keyed', limit: 2 };
const RATED = { task: 'flow-race.rated', limit: 5, periodMs: 1000 };
const RATED_BY_TENANT = { task: 'flow-race.rated-by-tenant', limit: 3, periodMs: 1000 };

let t: TestDatabase;
let workers: TestProcess[] = [];

beforeAll(async () => {
  t = await createTestDatabase();
  await queryRows(t.db, 'CREATE TABLE flow_probe (task text NOT NULL, key text NOT NULL, running int NOT NULL, peak int NOT NULL, PRIMARY KEY (task, key))');
  // A long lease: nothing is killed here, and a loaded machine must not cost an attempt its lease.
  const env = { DATABASE_URL: t.url, STEPWISE_LEASE_MS: '10000', STEPWISE_SHUTDOWN_GRACE_MS: '2000' };
  workers = await Promise.all([0, 1, 2].map(() => spawnTsx('test/fixtures/worker-process.ts', [FIXTURE], env, 'ready', 45_000)));
}, 60_000);

afterAll(async () => {
  // SIGTERM (a graceful stop), SIGKILL after 5 s: no process outlives the test.
  await Promise.all(
    workers.map(async (w) => {
      const timer = setTimeout(() => w.child.kill('SIGKILL'), 5000);
      w.child.kill('SIGTERM');
      await w.exited;
      clearTimeout(timer);
    }),
  );
  await t?.drop();
}, 20_000);

interface Started {
  id: string;
  tenant: string | null;
  status: string;
  attempt: number;
  /** attempt_started_at in epoch microseconds (exact: below 2^53). */
  at: number;
}

/** The executions of `task`, with their attempts' start stamps, in start order. */
async function startsOf(task: string): Promise<Started[]> {
  const rows = await queryRows<{ id: string; tenant: string | null; status: string; attempt: number; at: string }>(
    t.db,
    `SELECT id, data->>'tenant' AS tenant, status, attempt, (extract(epoch FROM attempt_started_at) * 1000000)::bigint::text AS at
       FROM stepwise.executions WHERE task = ? ORDER BY attempt_started_at, id`,
    [task],
  );
  return rows.map((r) => ({ ...r, at: Number(r.at) }));
}

const completedCount = async (task: string) =>
  (await queryRows<{ n: number }>(t.db, "SELECT count(*)::int AS n FROM stepwise.executions WHERE task = ? AND status = 'completed'", [task]))[0].n;

/** Every window of `periodMs` holds at most `limit` of the (sorted) stamps: the (i+limit)th is a period or more after the ith. */
function overRate(stamps: readonly number[], limit: number, periodMs: number): string[] {
  const over: string[] = [];
  for (let i = 0; i + limit < stamps.length; i++) {
    const gap = stamps[i + limit] - stamps[i];
    if (gap < periodMs * 1000) over.push(`starts ${i} and ${i + limit} only ${gap / 1000} ms apart`);
  }
  return over;
}

describe('flow control over three worker processes', () => {
  test('keyed concurrency: at most the limit per tenant at once, every tenant reaches it, and a later tenant is not starved by a backlog', async () => {
    // The tenants and their backlogs: `big` has most of it and is scheduled first.
    const backlog: Record<string, number> = { big: 90, b: 12, c: 12, d: 12, e: 12, f: 12 };
    const total = Object.values(backlog).reduce((a, b) => a + b, 0);
    expect(total).toBe(150);
    // Paused while scheduling, so that the whole backlog is due before any claim: big's 90 first
    // (due first), then the other tenants' interleaved.
    await queryRows(t.db, 'UPDATE stepwise.tasks SET paused = true WHERE name = ?', [KEYED.task]);
    await insertExecutions(t.db, Array.from({ length: backlog.big }, (_, i) => ({ task: KEYED.task, data: { tenant: 'big', i } })));
    const later: Array<{ tenant: string; i: number }> = [];
    for (let i = 0; later.length < total - backlog.big; i++) {
      for (const tenant of ['b', 'c', 'd', 'e', 'f']) if (i < backlog[tenant]) later.push({ tenant, i });
    }
    await insertExecutions(t.db, later.map((data) => ({ task: KEYED.task, data })));
    const keys = await queryRows<{ key: string | null; n: number }>(t.db, 'SELECT concurrency_key AS key, count(*)::int AS n FROM stepwise.executions WHERE task = ? GROUP BY 1 ORDER BY 1', [KEYED.task]);
    expect(Object.fromEntries(keys.map((k) => [k.key, k.n]))).toEqual(backlog);
    await queryRows(t.db, 'UPDATE stepwise.tasks SET paused = false WHERE name = ?', [KEYED.task]);

    await waitUntil(async () => (await completedCount(KEYED.task)) === total, `${total} ${KEYED.task} executions to complete`, 25_000, 100);
    const starts = await startsOf(KEYED.task);
    expect(starts).toHaveLength(total);
    // One attempt each: attempt_started_at is the start of the only run.
    expect(starts.filter((s) => s.status !== 'completed' || s.attempt !== 1)).toEqual([]);

    // The probe's peaks: never above the limit for any tenant, and the limit reached by every tenant
    // with two executions or more (the limit is a limit, not a serialization).
    const probes = await queryRows<{ key: string; running: number; peak: number }>(t.db, "SELECT key, running, peak FROM flow_probe WHERE task = 'keyed' ORDER BY key");
    expect(Object.fromEntries(probes.map((p) => [p.key, p.peak]))).toEqual(
      Object.fromEntries(Object.entries(backlog).map(([tenant, n]) => [tenant, Math.min(n, KEYED.limit)])),
    );
    expect(probes.every((p) => p.running === 0)).toBe(true);

    // No starvation: every later tenant started within the first quarter of big's run (which takes
    // at least 90 / 2 x 20 ms), and had all its executions started before big's last one.
    const byTenant = new Map<string, number[]>();
    for (const s of starts) byTenant.set(s.tenant as string, [...(byTenant.get(s.tenant as string) ?? []), s.at]);
    const big = byTenant.get('big') as number[];
    const [bigFirst, bigLast] = [big[0], big[big.length - 1]];
    expect(bigLast - bigFirst).toBeGreaterThanOrEqual(((backlog.big / KEYED.limit) - 1) * 20_000);
    for (const tenant of ['b', 'c', 'd', 'e', 'f']) {
      const mine = byTenant.get(tenant) as number[];
      const firstIntoBig = (mine[0] - bigFirst) / (bigLast - bigFirst);
      expect({ tenant, firstStartedWithinFirstQuarter: firstIntoBig < 0.25 }).toEqual({ tenant, firstStartedWithinFirstQuarter: true });
      expect({ tenant, lastBeforeBigsLast: mine[mine.length - 1] < bigLast }).toEqual({ tenant, lastBeforeBigsLast: true });
    }
  }, 35_000);

  test('rate limit: no more than the limit of starts in any window of the period over all processes, keyed or not, yet no crawl', async () => {
    const n = 25;
    const perTenant = 9;
    const [{ now }] = await queryRows<{ now: string }>(t.db, 'SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint::text AS now');
    const scheduledAt = Number(now);
    await Promise.all([
      insertExecutions(t.db, Array.from({ length: n }, (_, i) => ({ task: RATED.task, data: { i } }))),
      insertExecutions(t.db, ['x', 'y'].flatMap((tenant) => Array.from({ length: perTenant }, (_, i) => ({ task: RATED_BY_TENANT.task, data: { tenant, i } })))),
    ]);
    await waitUntil(
      async () => (await completedCount(RATED.task)) === n && (await completedCount(RATED_BY_TENANT.task)) === 2 * perTenant,
      'the rate-limited executions to complete',
      20_000,
      100,
    );

    const unkeyed = await startsOf(RATED.task);
    expect(unkeyed.filter((s) => s.status !== 'completed' || s.attempt !== 1)).toEqual([]);
    const stamps = unkeyed.map((s) => s.at);
    expect(overRate(stamps, RATED.limit, RATED.periodMs)).toEqual([]);
    // Not a crawl: n / limit windows, and the last start no later than two periods past that.
    const span = (stamps[stamps.length - 1] - scheduledAt) / 1000;
    expect(span).toBeLessThanOrEqual((n / RATED.limit + 2) * RATED.periodMs);

    const keyed = await startsOf(RATED_BY_TENANT.task);
    expect(keyed.filter((s) => s.status !== 'completed' || s.attempt !== 1)).toEqual([]);
    for (const tenant of ['x', 'y']) {
      const mine = keyed.filter((s) => s.tenant === tenant).map((s) => s.at);
      expect(mine).toHaveLength(perTenant);
      expect({ tenant, over: overRate(mine, RATED_BY_TENANT.limit, RATED_BY_TENANT.periodMs) }).toEqual({ tenant, over: [] });
      expect((mine[mine.length - 1] - scheduledAt) / 1000).toBeLessThanOrEqual((perTenant / RATED_BY_TENANT.limit + 2) * RATED_BY_TENANT.periodMs);
    }
    // Keys have windows of their own: over both tenants, some window held more than one key's limit.
    expect(overRate(keyed.map((s) => s.at), RATED_BY_TENANT.limit, RATED_BY_TENANT.periodMs)).not.toEqual([]);
  }, 30_000);
});
