// Where a throttled claim's time goes: EXPLAIN (ANALYZE, BUFFERS) of the claim statements of the flow
// benchmark's variants (scripts/bench/flow.ts) on a table of `rows` pending executions of one task
// spread over `keys` keys, each on a fresh database, next to the plain task's batched claim.
//
//   npx tsx scripts/bench/flow-explain.ts [--rows 10000] [--keys 100] [--want 32] [--variants keyed,plain]
//
// Two states per variant: `fresh` (every row pending, after VACUUM ANALYZE, as a drain starts) and
// `half-drained`: half the rows claimed by src/'s own claim function (claimThrottledExecutions, or
// claimExecutions for the plain task), `want` at a time, each claim's rows completed before the next
// claim as a worker's would be, no VACUUM: the dead index entries and the rate-limit start log a
// drain leaves. Those claims are timed (whole call: lock, claim and commit round trips; the first and
// the last tenth's means show whether a claim's cost grows as the drain goes on). In each state, the
// statement is run 25 times as the worker runs it (a named prepared statement, so PostgreSQL's plan
// cache picks custom or generic plans as it would), each in a transaction rolled back, median of the
// last 20; then EXPLAIN (ANALYZE, BUFFERS) of one custom and one generic plan. The statement texts come from src/ itself (claimThrottledExecutions, whose claim
// is caught on its way to the server, and claimStatements). Prints a summary and writes every plan to
// bench-results/flow-explain-<time>.txt. Uses PGHOST:PGPORT (default 127.0.0.1:5432), else an embedded
// PostgreSQL.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import pg from 'pg';
import { defineTask } from '../../src/engine/task';
import { TaskRegistry } from '../../src/engine/registry';
import { insertExecutions } from '../../src/store/executions';
import { upsertTasks } from '../../src/store/tasks';
import { claimExecutions, claimStatements } from '../../src/store/transitions/claim';
import { claimThrottledExecutions, throttledStatement } from '../../src/store/transitions/claim-throttled';
import { startEmbeddedPostgres } from '../../src/store/embedded';
import { ROOT } from './build';
import { freshDatabase } from './extras';
import { reachable } from './reachable';

/** As FLOW_VARIANTS in stepwise-adapter.mjs (the benchmark's tasks), without the S2 task's two. */
const VARIANTS: Record<string, { flow: Record<string, unknown> | null; keyed: boolean; priorities?: number }> = {
  plain: { flow: null, keyed: false },
  keyed: { flow: { concurrency: { limit: 32, key: '/tenant' } }, keyed: true },
  'unkeyed-limit': { flow: { concurrency: { limit: 32 } }, keyed: false },
  rate: { flow: { rateLimit: { limit: 1000000, period: '1s' } }, keyed: false },
  'rate-keyed': { flow: { rateLimit: { limit: 1000000, period: '1s', key: '/tenant' } }, keyed: true },
  priority: { flow: null, keyed: false, priorities: 10 },
};

const WORKER_ID = '00000000-0000-4000-8000-000000000001';

/** The throttled claim's text and parameters, as claimThrottledExecutions prepares and runs them. */
function throttledClaimSql(task: string, policy: Parameters<typeof claimThrottledExecutions>[2], want: number) {
  const statement = throttledStatement(task, policy);
  return { text: statement.text, values: statement.keyed ? [want, 30, WORKER_ID, '', want] : [want, 30, WORKER_ID] };
}

interface Measured {
  variant: string;
  state: string;
  medianMs: number;
  custom: string;
  generic: string;
  customMs: number;
  genericMs: number;
}

const execMs = (plan: string) => Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? NaN);
const planMs = (plan: string) => Number(/Planning Time: ([\d.]+) ms/.exec(plan)?.[1] ?? NaN);

async function measure(url: string, variant: string, state: string, text: string, values: unknown[]): Promise<Measured> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const times: number[] = [];
    for (let i = 0; i < 25; i++) {
      await c.query('BEGIN ISOLATION LEVEL READ COMMITTED');
      await c.query("SELECT set_config('stepwise.claim_locked', 'true', true)");
      const t0 = performance.now();
      await c.query({ name: 'claim', text, values });
      times.push(performance.now() - t0);
      await c.query('ROLLBACK');
    }
    const last = times.slice(5).sort((a, b) => a - b);
    const explain = async (mode: string) => {
      await c.query('BEGIN ISOLATION LEVEL READ COMMITTED');
      await c.query("SELECT set_config('stepwise.claim_locked', 'true', true)");
      try {
        await c.query(`SET LOCAL plan_cache_mode = ${mode}`);
        await c.query(`PREPARE explained AS ${text}`);
        const literals = values.map((v) => (v === null ? 'NULL' : typeof v === 'number' ? String(v) : pg.escapeLiteral(String(v))));
        const r = await c.query(`EXPLAIN (ANALYZE, BUFFERS) EXECUTE explained(${literals.join(', ')})`);
        return r.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
      } finally {
        await c.query('ROLLBACK');
        await c.query('DEALLOCATE ALL').catch(() => undefined);
      }
    };
    const custom = await explain('force_custom_plan');
    const generic = await explain('force_generic_plan');
    return { variant, state, medianMs: last[Math.floor(last.length / 2)], custom, generic, customMs: execMs(custom), genericMs: execMs(generic) };
  } finally {
    await c.end();
  }
}

async function main(): Promise<void> {
  const opts = new Command('flow-explain')
    .option('--rows <n>', 'pending executions of the task', '10000')
    .option('--keys <n>', 'keys (tenants) they spread over', '100')
    .option('--want <n>', "the claim's room (the worker's free slots)", '32')
    .option('--variants <list>', `variants (${Object.keys(VARIANTS).join(',')})`, Object.keys(VARIANTS).join(','))
    .parse(process.argv)
    .opts<{ rows: string; keys: string; want: string; variants: string }>();
  const rows = Number(opts.rows);
  const keys = Number(opts.keys);
  const want = Number(opts.want);
  const env: NodeJS.ProcessEnv = { ...process.env };
  let embedded: Awaited<ReturnType<typeof startEmbeddedPostgres>> | undefined;
  let embeddedDir: string | undefined;
  if (!(await reachable(env.PGHOST ?? '127.0.0.1', Number(env.PGPORT ?? 5432)))) {
    embeddedDir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-explain-pg-'));
    embedded = await startEmbeddedPostgres({ dataDir: path.join(embeddedDir, 'pgdata'), database: 'postgres' });
    Object.assign(env, { PGHOST: '127.0.0.1', PGPORT: String(embedded.port), PGUSER: 'postgres', PGPASSWORD: 'postgres' });
  }
  const results: Measured[] = [];
  const drains: { variant: string; claims: number; firstMs: number; lastMs: number; meanMs: number }[] = [];
  try {
    for (const variant of opts.variants.split(',').filter(Boolean)) {
      const spec = VARIANTS[variant];
      if (!spec) throw new Error(`no variant ${variant} (there are ${Object.keys(VARIANTS).join(', ')})`);
      const t = await freshDatabase(env);
      try {
        const def = defineTask({ name: `explain-${variant}`, ...(spec.flow ?? {}), run: async () => null });
        const registry = new TaskRegistry([def as never]);
        await upsertTasks(t.db, registry.toRegistrations());
        for (let i = 0; i < rows; i += 1000) {
          const items = Array.from({ length: Math.min(1000, rows - i) }, (_, j) => ({
            task: def.name,
            data: { i: i + j, tenant: `t${String((i + j) % keys).padStart(3, '0')}` },
            priority: spec.priorities ? (i + j) % spec.priorities : undefined,
          }));
          await insertExecutions(t.db, items);
        }
        await t.db.raw('VACUUM ANALYZE stepwise.executions');
        const policy = registry.get(def.name)?.flow;
        const statement =
          policy && (policy.concurrency || policy.rateLimit)
            ? throttledClaimSql(def.name, policy, want)
            : { text: claimStatements([def.name]).claimSql, values: [want, 30, WORKER_ID] };
        results.push(await measure(t.url, variant, 'fresh', statement.text, statement.values));
        // Half drained by real claims, each batch completed before the next claim.
        const claimMs: number[] = [];
        let cursor = '';
        for (let taken = 0; taken < rows / 2; ) {
          const t0 = performance.now();
          let ids: string[];
          if (policy && (policy.concurrency || policy.rateLimit)) {
            const claim = await claimThrottledExecutions(t.db, def.name, policy, want, 30000, WORKER_ID, cursor);
            cursor = claim.cursor;
            ids = claim.claimed.map((c) => c.execution.id);
          } else {
            ids = (await claimExecutions(t.db, [def.name], want, 30000, WORKER_ID)).map((c) => c.execution.id);
          }
          claimMs.push(performance.now() - t0);
          if (ids.length === 0) throw new Error(`${variant}: a claim took nothing after ${taken}`);
          await t.db.raw(`UPDATE stepwise.executions SET status = 'completed', completed_at = now(), due_at = NULL WHERE id = ANY(?::uuid[])`, [ids]);
          taken += ids.length;
        }
        const tenth = Math.max(1, Math.floor(claimMs.length / 10));
        const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
        drains.push({ variant, claims: claimMs.length, firstMs: mean(claimMs.slice(0, tenth)), lastMs: mean(claimMs.slice(-tenth)), meanMs: mean(claimMs) });
        results.push(await measure(t.url, variant, 'half-drained', statement.text, statement.values));
      } finally {
        await t.drop();
      }
    }
  } finally {
    await embedded?.stop();
    if (embeddedDir) rmSync(embeddedDir, { recursive: true, force: true });
  }
  const lines = [
    `claim statements, want ${want}, on ${rows.toLocaleString('en')} pending executions over ${keys} keys (ms; EXPLAIN columns: PostgreSQL's own timings)`,
    '',
    '| variant | state | as the worker runs it (median of 20, rolled back) | EXPLAIN ANALYZE custom (planning) | generic (planning) |',
    '|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.variant} | ${r.state} | ${r.medianMs.toFixed(2)} | ${r.customMs.toFixed(2)} (${planMs(r.custom).toFixed(2)}) | ${r.genericMs.toFixed(2)} (${planMs(r.generic).toFixed(2)}) |`,
    ),
    '',
    `the claims that drained the first half, whole calls as the worker makes them (throttled: lock, claim and commit round trips)`,
    '',
    '| variant | claims | mean ms | first tenth | last tenth |',
    '|---|---|---|---|---|',
    ...drains.map((d) => `| ${d.variant} | ${d.claims} | ${d.meanMs.toFixed(2)} | ${d.firstMs.toFixed(2)} | ${d.lastMs.toFixed(2)} |`),
  ];
  const plans = results.map((r) => `==== ${r.variant}, ${r.state}: custom plan\n${r.custom}\n\n==== ${r.variant}, ${r.state}: generic plan\n${r.generic}\n`);
  mkdirSync(path.join(ROOT, 'bench-results'), { recursive: true });
  const file = path.join(ROOT, 'bench-results', `flow-explain-${new Date().toISOString().replace(/[:.]/g, '-')}.txt`);
  writeFileSync(file, `${lines.join('\n')}\n\n${plans.join('\n')}`);
  process.stdout.write(`${lines.join('\n')}\n\nplans: ${path.relative(process.cwd(), file)}\n`);
}

main().catch((err) => {
  process.stderr.write(`flow-explain failed: ${(err as Error).stack}\n`);
  process.exit(1);
});
