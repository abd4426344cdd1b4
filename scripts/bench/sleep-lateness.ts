// Sleep lateness: 1,000 executions each sleep once, their wake-ups spread over three seconds, on one
// worker with the default poll interval. They all sleep until instants after every one of them has
// started and suspended, so that no wake-up waits behind the first runs of the others. Lateness is
// the sleep step's completed_at minus its wake_at, both on the database's clock: the claim, the
// resume and the sleep's completion write are in it.
import type { Db } from '../../src/store/db';
import { createLogger } from '../../src/logger';
import { defineTask } from '../../src/engine/task';
import { upsertTasks } from '../../src/store/tasks';
import { TaskRegistry } from '../../src/engine/registry';
import { Worker } from '../../src/engine/worker';
import { insertExecutions } from '../../src/store/executions';
import { queryRows } from '../../src/store/db';

type FreshDatabase = (env: NodeJS.ProcessEnv) => Promise<{ url: string; db: Db; drop(): Promise<void> }>;

const log = createLogger({ level: 'warn', pretty: false });
const SLEEPS = 1000;
/** From the schedule to the first wake-up: every execution has started and suspended well before. */
const FIRST_WAKE_MS = 5000;
/** The wake-ups are spread evenly over this much time. */
const SPREAD_MS = 3000;

const sleeper = defineTask({
  name: 'bench-sleep',
  async run(ctx, data: unknown) {
    await ctx.sleepUntil('nap', (data as { until: string }).until);
    return 'awake';
  },
});

const pct = (sorted: number[], p: number) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] * 10) / 10;

/** p50, p99 and max lateness of the sleeps' wake-ups, and the claims the worker sent meanwhile. */
export async function sleepLateness(env: NodeJS.ProcessEnv, freshDatabase: FreshDatabase) {
  const t = await freshDatabase(env);
  await upsertTasks(t.db, new TaskRegistry([sleeper as never]).toRegistrations());
  let claims = 0;
  let emptyClaims = 0;
  const worker = new Worker({
    db: t.db,
    databaseUrl: t.url,
    tasks: [sleeper as never],
    log,
    observer: {
      claim: (_room, claimed) => {
        claims += 1;
        if (claimed === 0) emptyClaims += 1;
      },
    },
  });
  await worker.start();
  let late: number[];
  /** Whether every execution was suspended before the first wake-up (else some waited behind others' first runs). */
  let allWaiting = false;
  const started = Date.now();
  try {
    const first = Date.now() + FIRST_WAKE_MS;
    const items = Array.from({ length: SLEEPS }, (_, i) => ({ task: 'bench-sleep', data: { until: new Date(first + Math.round((i * SPREAD_MS) / SLEEPS)).toISOString() } }));
    await insertExecutions(t.db, items);
    const deadline = first + SPREAD_MS + 30_000;
    for (;;) {
      if (!allWaiting && Date.now() < first) {
        const [{ waiting }] = await queryRows<{ waiting: number }>(t.db, `SELECT count(*)::int AS waiting FROM stepwise.executions WHERE status = 'waiting'`);
        allWaiting = waiting === SLEEPS;
      }
      const [{ done }] = await queryRows<{ done: number }>(t.db, `SELECT count(*)::int AS done FROM stepwise.executions WHERE status = 'completed'`);
      if (done === SLEEPS) break;
      if (Date.now() > deadline) throw new Error(`only ${done} of ${SLEEPS} sleeps ended`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const rows = await queryRows<{ late_ms: number }>(
      t.db,
      `SELECT (extract(epoch FROM completed_at - wake_at) * 1000)::float8 AS late_ms FROM stepwise.steps WHERE kind = 'sleep' AND completed`,
    );
    late = rows.map((r) => r.late_ms).sort((a, b) => a - b);
  } finally {
    await worker.stop();
    await t.drop();
  }
  const seconds = (Date.now() - started) / 1000;
  const values = {
    sleeps: late.length,
    p50_ms: pct(late, 50),
    p99_ms: pct(late, 99),
    max_ms: Math.round(late[late.length - 1] * 10) / 10,
    early: late.filter((ms) => ms < 0).length,
    all_suspended_first: allWaiting,
    claims,
    empty_claims: emptyClaims,
  };
  return {
    label: `sleep lateness: ${SLEEPS.toLocaleString('en')} sleeps waking over ${SPREAD_MS / 1000} s, one worker, default poll interval`,
    summary:
      `wake time minus due time p50 ${values.p50_ms} ms, p99 ${values.p99_ms} ms, max ${values.max_ms} ms; ` +
      `${values.claims} claims (${values.empty_claims} empty) in ${seconds.toFixed(1)} s` +
      (allWaiting ? '' : '; NOT all suspended before the first wake-up: the figures include waiting behind first runs'),
    values,
  };
}
