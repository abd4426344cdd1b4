// Stepwise-only scenarios of `make bench`, each on a fresh database of the benchmark's server.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import pg from 'pg';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/logger';
import { createDb, type Db } from '../../src/store/db';
import { migrateLatest } from '../../src/store/migrate';
import { upsertTasks } from '../../src/store/tasks';
import { Worker } from '../../src/engine/worker';
import { defineTask } from '../../src/engine/task';
import { startApiServer } from '../../src/api/server';
import { createMetricsRegistry } from '../../src/metrics';
import { findFreePort } from '../../src/store/embedded';
import { RetentionSweeper } from '../../src/engine/retention';
import { resumeCost } from './resume-cost';
import { sleepLateness } from './sleep-lateness';
import { costPerExecution } from './cost';
import { streams } from './streams';
import { longPolls } from './long-polls';
import { explainList } from './list-plans';
import { fillHistory, loadOnBigTable } from './big-table';
import { flowClaimCost, flowVariants } from './flow';
import type { ExtraResult } from './extra-result';

export type { ExtraResult } from './extra-result';

export interface ExtrasOptions {
  env: NodeJS.ProcessEnv;
  listRows: number;
  longPolls: number;
  progress: (step: string) => void;
  /** Run only the extras of these names (EXTRA_NAMES and OPT_IN_EXTRAS); EXTRA_NAMES when undefined. */
  only?: readonly string[];
  /** Repetitions of the extras that repeat (flow). */
  reps: number;
  /** Executions per run of the flow extra (default 10,000). */
  n?: number;
  /** The flow extra's variants (all by default). */
  flowVariants?: readonly string[];
}

/** The extras' short names, for `--extras-only`, in the order they run. */
export const EXTRA_NAMES = ['latency', 'long-polls', 'streams', 'idle-worker', 'list', 'history', 'resume-cost', 'sleep-lateness', 'cost'] as const;

/**
 * Extras that run only when `--extras-only` names them (they take longer than the default run should):
 * flow, the claim cost of each flow-control feature (scripts/bench/flow.ts): 6 variants, each run a
 * fresh database, a 10,000-execution preload over HTTP and a drain, about 8-12 s on the 2-core VM, so
 * 2.5-3.5 min at 3 reps.
 */
export const OPT_IN_EXTRAS = ['flow'] as const;

/** How many progress steps runExtras reports for these options. */
export function extraSteps(options: Pick<ExtrasOptions, 'only' | 'reps' | 'flowVariants'>): number {
  const names: readonly string[] = options.only ?? EXTRA_NAMES;
  // One each, but flow: one per variant and repetition.
  return names.reduce((sum, x) => sum + (x === 'flow' ? flowVariants(options.flowVariants).length * options.reps : 1), 0);
}

const log = createLogger({ level: 'warn', pretty: false });

function adminUrl(env: NodeJS.ProcessEnv, database = 'postgres'): string {
  const user = encodeURIComponent(env.PGUSER ?? 'postgres');
  const pass = encodeURIComponent(env.PGPASSWORD ?? 'postgres');
  return `postgres://${user}:${pass}@${env.PGHOST ?? '127.0.0.1'}:${env.PGPORT ?? 5432}/${database}`;
}

export async function freshDatabase(env: NodeJS.ProcessEnv): Promise<{ url: string; db: Db; drop(): Promise<void> }> {
  const name = `sw_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl(env) });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = adminUrl(env, name);
  const db = createDb({ url, poolMax: 10 });
  await migrateLatest(db);
  return {
    url,
    db,
    async drop() {
      await db.destroy();
      const c = new pg.Client({ connectionString: adminUrl(env) });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

export const pct = (values: number[], p: number) => {
  const s = [...values].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] * 100) / 100;
};

function httpJson(port: number, method: string, urlPath: string, body?: unknown, agent?: http.Agent): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = http.request(
      { host: '127.0.0.1', port, method, path: urlPath, agent, headers: payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null });
        });
      },
    );
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}

/** Event delivery -> handler resumed, and completion commit -> long-poll answered, in one process. */
async function latencies(env: NodeJS.ProcessEnv, samples = 200): Promise<ExtraResult[]> {
  const t = await freshDatabase(env);
  const resumed = new Map<string, number>();
  const committed = new Map<string, number>();
  const waiter = defineTask({
    name: 'bench-wait',
    async run(ctx) {
      await ctx.waitForEvent('go');
      resumed.set(ctx.executionId, performance.now());
      return 'ok';
    },
  });
  const port = await findFreePort();
  const config = loadConfig({ env: {}, overrides: { port, logLevel: 'warn', databaseUrl: t.url } });
  const registry = createMetricsRegistry();
  const api = await startApiServer({ config, databaseUrl: t.url, db: t.db, log, registry });
  const worker = new Worker({
    db: t.db,
    databaseUrl: t.url,
    tasks: [waiter as never],
    log,
    observer: { finished: (_task, outcome) => void outcome },
  });
  // Completion commit time: the moment the worker's completion write resolved.
  const original = (worker as unknown as { completions: { submit: (c: { id: string }) => Promise<boolean> } }).completions;
  const submit = original.submit.bind(original);
  original.submit = async (c) => {
    const landed = await submit(c);
    committed.set(c.id, performance.now());
    return landed;
  };
  await worker.start();
  const agent = new http.Agent({ keepAlive: true });
  const resume: number[] = [];
  const answer: number[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      const created = await httpJson(port, 'POST', '/api/v1/executions', { task: 'bench-wait', data: {} }, agent);
      const id = (created.body as { execution_id: string }).execution_id;
      for (;;) {
        const e = await httpJson(port, 'GET', `/api/v1/executions/${id}`, undefined, agent);
        if ((e.body as { waiting_for_event: unknown }).waiting_for_event) break;
        await new Promise((r) => setTimeout(r, 2));
      }
      let answeredAt = 0;
      const poll = httpJson(port, 'GET', `/api/v1/executions/${id}/wait?timeout=30`, undefined, agent).then((r) => {
        answeredAt = performance.now();
        return r;
      });
      await new Promise((r) => setTimeout(r, 5)); // let the long-poll register
      const sent = performance.now();
      await httpJson(port, 'POST', `/api/v1/events/${id}/go`, null, agent);
      const r = await poll;
      if (r.status !== 200) throw new Error(`long-poll answered ${r.status}`);
      resume.push((resumed.get(id) as number) - sent);
      // The NOTIFY can beat the commit's acknowledgment to this process: then the answer took no time.
      while (!committed.has(id)) await new Promise((r) => setTimeout(r, 1));
      answer.push(Math.max(0, answeredAt - (committed.get(id) as number)));
    }
  } finally {
    agent.destroy();
    await worker.stop();
    await api.close();
    await t.drop();
  }
  return [
    { label: 'event delivery -> handler resumed', summary: `p50 ${pct(resume, 50)} ms, p99 ${pct(resume, 99)} ms (${samples} samples)`, values: { p50_ms: pct(resume, 50), p99_ms: pct(resume, 99), samples } },
    { label: 'completion commit -> long-poll answered', summary: `p50 ${pct(answer, 50)} ms, p99 ${pct(answer, 99)} ms (${samples} samples)`, values: { p50_ms: pct(answer, 50), p99_ms: pct(answer, 99), samples } },
  ];
}

/** Statements per second an idle worker costs the database. */
async function idleWorker(env: NodeJS.ProcessEnv, seconds = 10): Promise<ExtraResult> {
  const t = await freshDatabase(env);
  const name = new URL(t.url).pathname.slice(1);
  const worker = new Worker({ db: t.db, databaseUrl: t.url, tasks: [defineTask({ name: 'bench-idle', run: async () => null }) as never], log });
  await worker.start();
  const probe = new pg.Client({ connectionString: adminUrl(env) });
  await probe.connect();
  const count = async () => {
    const r = await probe.query('SELECT pg_stat_clear_snapshot()');
    void r;
    const { rows } = await probe.query('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1', [name]);
    return Number(rows[0].n);
  };
  try {
    await new Promise((r) => setTimeout(r, 1500));
    const before = await count();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const after = await count();
    const perSecond = Math.round(((after - before) / seconds) * 100) / 100;
    return { label: 'database transactions per second from an idle worker', summary: `${perSecond} per s over ${seconds} s`, values: { per_second: perSecond, seconds } };
  } finally {
    await probe.end();
    await worker.stop();
    await t.drop();
  }
}

/**
 * GET /executions with total at `rows` executions, 10 ms apart: no filter, status filter, task filter;
 * then the filters of migration 012, each timed over HTTP and its statement's plan read with EXPLAIN
 * ANALYZE: a selective tag (1 in 10,000 executions), a common one (1 in 10), an idempotency key, and
 * a one-minute creation range (6,000 executions). Half the executions carry two tags (one of 5,000
 * tenants and one of 5 regions), a third an idempotency key.
 */
async function listAtScale(env: NodeJS.ProcessEnv, rows: number, reps: number, samples = 200): Promise<ExtraResult[]> {
  const t = await freshDatabase(env);
  await fillHistory(t.db, rows, (done) => process.stdout.write(`list: ${done.toLocaleString('en')} of ${rows.toLocaleString('en')} rows written\n`));
  const { rows: bounds } = await t.db.raw('SELECT min(created_at) AS first FROM stepwise.executions');
  const rangeStart = new Date((bounds[0].first as Date).getTime() + Math.floor((rows / 100) * 500)); // halfway
  const rangeEnd = new Date(rangeStart.getTime() + 60_000);
  const key = `order-${3 * Math.floor(rows / 6)}`;
  const port = await findFreePort();
  const config = loadConfig({ env: {}, overrides: { port, logLevel: 'warn', databaseUrl: t.url } });
  const api = await startApiServer({ config, databaseUrl: t.url, db: t.db, log, registry: createMetricsRegistry() });
  const agent = new http.Agent({ keepAlive: true });
  let closed = false;
  const measure = async (query: string) => {
    const times: number[] = [];
    let total = 0;
    for (let i = 0; i < samples; i++) {
      const t0 = performance.now();
      const r = await httpJson(port, 'GET', `/api/v1/executions?limit=50&offset=${(i * 50) % 5000}${query}`, undefined, agent);
      if (r.status !== 200) throw new Error(`list answered ${r.status}`);
      times.push(performance.now() - t0);
      total = (r.body as { total: number }).total;
    }
    return { p50: pct(times, 50), p99: pct(times, 99), total };
  };
  try {
    const none = await measure('');
    const status = await measure('&status=failed');
    const task = await measure('&task=task-7');
    const found: ExtraResult['values'] = { rows };
    const lines: string[] = [];
    const filters = [
      { name: 'task', query: '&task=task-8', filter: { task: 'task-8' }, intended: 'executions_task_created_idx' },
      { name: 'task_status', query: '&task=task-8&status=failed', filter: { task: 'task-8', status: 'failed' as const }, intended: 'executions_task_status_created_idx' },
      // No execution of task-7 failed (the fill's task and status never meet): no index but this one finds that quickly.
      { name: 'task_status_none', query: '&task=task-7&status=failed', filter: { task: 'task-7', status: 'failed' as const }, intended: 'executions_task_status_created_idx' },
      { name: 'tag', query: '&tag=tenant-42', filter: { tags: ['tenant-42'] }, intended: 'executions_tags_idx' },
      { name: 'common_tag', query: '&tag=region-1', filter: { tags: ['region-1'] }, intended: 'executions_tags_idx' },
      { name: 'key', query: `&idempotency_key=${key}`, filter: { idempotencyKey: key }, intended: 'executions_idempotency_key_idx' },
      {
        name: 'created_range',
        query: `&created_after=${rangeStart.toISOString()}&created_before=${rangeEnd.toISOString()}`,
        filter: { createdAfter: rangeStart, createdBefore: rangeEnd },
        intended: 'executions_created_idx',
      },
    ];
    for (const f of filters) {
      const timed = await measure(f.query);
      const plan = await explainList(t.db, f.filter, f.intended);
      Object.assign(found, {
        [`${f.name}_total`]: timed.total,
        [`${f.name}_p50_ms`]: timed.p50,
        [`${f.name}_p99_ms`]: timed.p99,
        [`${f.name}_index_used`]: plan.intendedUsed,
        [`${f.name}_seq_scan`]: plan.seqScan,
        [`${f.name}_indexes`]: plan.indexes.join(' '),
        [`${f.name}_explain_ms`]: plan.executionMs,
      });
      lines.push(
        `${f.name} (${timed.total.toLocaleString('en')} match): ${plan.intended} ${plan.intendedUsed ? 'used' : 'NOT used'}${plan.seqScan ? ', with a seq scan' : ''}, ` +
          `EXPLAIN ANALYZE ${plan.executionMs} ms; HTTP p50 ${timed.p50} / p99 ${timed.p99} ms`,
      );
    }
    agent.destroy();
    await api.close();
    closed = true;
    const load = await loadOnBigTable(env, t.db, t.url, rows, reps);
    return [
      {
        label: `list with total at ${rows.toLocaleString('en')} executions`,
        summary: `no filter p50 ${none.p50} / p99 ${none.p99} ms; status p50 ${status.p50} / p99 ${status.p99} ms; task p50 ${task.p50} / p99 ${task.p99} ms`,
        values: { rows, none_p50_ms: none.p50, none_p99_ms: none.p99, status_p50_ms: status.p50, status_p99_ms: status.p99, task_p50_ms: task.p50, task_p99_ms: task.p99 },
      },
      { label: `list filters at ${rows.toLocaleString('en')} executions`, summary: lines.join('; '), values: found },
      load,
    ];
  } finally {
    if (!closed) {
      agent.destroy();
      await api.close();
    }
    await t.drop();
  }
}

/**
 * A long history: `rows` executions of 20 tasks created over 40 days, 0.2 % of them still active, the
 * finished ones with two steps each. Measures GET /tasks (the dashboard polls it) against a full count
 * per request, then one retention sweep at the default 30 days (about a quarter of the rows).
 */
async function historyAtScale(env: NodeJS.ProcessEnv, rows: number, samples = 50): Promise<ExtraResult> {
  const t = await freshDatabase(env);
  await upsertTasks(t.db, Array.from({ length: 20 }, (_, i) => ({ name: `task-${i}`, dataSchema: null, eventSchemas: {}, retry: null })));
  await t.db.raw(
    `INSERT INTO stepwise.executions (id, task, status, data, created_at, completed_at, attempt)
     SELECT gen_random_uuid(), 'task-' || (g % 20),
            CASE g % 1000 WHEN 0 THEN 'pending' WHEN 1 THEN 'waiting' ELSE (ARRAY['completed','completed','completed','failed','cancelled'])[1 + g % 5] END,
            jsonb_build_object('n', g), ts, CASE WHEN g % 1000 > 1 THEN ts END, 1
       FROM generate_series(1, ?) g, LATERAL (SELECT now() - make_interval(secs => (? - g) * 3456000.0 / ?) AS ts) x`,
    [rows, rows, rows],
  );
  await t.db.raw(
    `INSERT INTO stepwise.steps (execution_id, seq, name, kind, completed, result, completed_at)
     SELECT id, s, 'step', 'step', true, '1', completed_at FROM stepwise.executions, generate_series(0, 1) s WHERE completed_at IS NOT NULL`,
  );
  await t.db.raw('VACUUM ANALYZE stepwise.executions');
  await t.db.raw('VACUUM ANALYZE stepwise.steps');
  const port = await findFreePort();
  const config = loadConfig({ env: {}, overrides: { port, logLevel: 'warn', databaseUrl: t.url } });
  const api = await startApiServer({ config, databaseUrl: t.url, db: t.db, log, registry: createMetricsRegistry() });
  const agent = new http.Agent({ keepAlive: true });
  try {
    const fullCount = performance.now();
    await t.db.raw('SELECT task, status, count(*)::int AS count FROM stepwise.executions GROUP BY task, status');
    const fullCountMs = Math.round(performance.now() - fullCount);
    const times: number[] = [];
    for (let i = 0; i < samples + 1; i++) {
      const t0 = performance.now();
      const r = await httpJson(port, 'GET', '/api/v1/tasks', undefined, agent);
      if (r.status !== 200) throw new Error(`GET /tasks answered ${r.status}`);
      times.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 20));
    }
    const first = Math.round(times[0]);
    const later = times.slice(1);
    const sweepStart = performance.now();
    const deleted = await new RetentionSweeper({ db: t.db, log, keepFinishedMs: 30 * 86_400_000 }).sweep();
    const sweepS = (performance.now() - sweepStart) / 1000;
    const perSecond = Math.round(deleted / sweepS);
    return {
      label: `GET /tasks and retention at ${rows.toLocaleString('en')} executions`,
      summary:
        `GET /tasks first ${first} ms, then p50 ${pct(later, 50)} / p99 ${pct(later, 99)} ms (a full count per request took ${fullCountMs} ms); ` +
        `a 30-day sweep deleted ${deleted.toLocaleString('en')} finished executions with their ${(2 * deleted).toLocaleString('en')} steps in ${sweepS.toFixed(1)} s (${perSecond.toLocaleString('en')}/s)`,
      values: { rows, tasks_first_ms: first, tasks_p50_ms: pct(later, 50), tasks_p99_ms: pct(later, 99), full_count_ms: fullCountMs, swept: deleted, sweep_s: Number(sweepS.toFixed(2)), swept_per_s: perSecond },
    };
  } finally {
    agent.destroy();
    await api.close();
    await t.drop();
  }
}

/** Runs each extra; one that fails is reported as such and the others still run. */
export async function runExtras(options: ExtrasOptions): Promise<ExtraResult[]> {
  const out: ExtraResult[] = [];
  const attempt = async (name: (typeof EXTRA_NAMES)[number] | (typeof OPT_IN_EXTRAS)[number], label: string, run: () => Promise<ExtraResult[]>) => {
    const selected = options.only ? options.only.includes(name) : (EXTRA_NAMES as readonly string[]).includes(name);
    if (!selected) return;
    try {
      out.push(...(await run()));
    } catch (err) {
      out.push({ label, summary: `failed: ${(err as Error).message}`, values: { failed: true } });
    }
    if (name !== 'flow') options.progress(label); // flow reports each run itself
  };
  await attempt('latency', 'event and long-poll latency', () => latencies(options.env));
  await attempt('long-polls', `${options.longPolls} concurrent long-polls`, async () => [await longPolls(options.env, options.longPolls, freshDatabase)]);
  await attempt('streams', `${options.longPolls} concurrent streams`, async () => [await streams(options.env, options.longPolls, freshDatabase)]);
  await attempt('idle-worker', 'idle worker', async () => [await idleWorker(options.env)]);
  await attempt('list', 'list at scale', () => listAtScale(options.env, options.listRows, options.reps));
  await attempt('history', 'history at scale', async () => [await historyAtScale(options.env, options.listRows)]);
  await attempt('resume-cost', 'resume cost by history length', async () => [await resumeCost(options.env, freshDatabase)]);
  await attempt('sleep-lateness', 'sleep lateness', async () => [await sleepLateness(options.env, freshDatabase)]);
  await attempt('cost', 'cost per execution', async () => [await costPerExecution(options.env, freshDatabase)]);
  await attempt('flow', 'flow-control claim cost', async () => [
    await flowClaimCost({ env: options.env, reps: options.reps, n: options.n, variants: options.flowVariants, progress: options.progress }),
  ]);
  return out;
}
