// Stepwise's adapter for the benchmark scenarios S1-S4. Two drivers load it: Stepwise's own
// (scripts/bench/scenarios.ts, what `make bench` runs) and, with `make bench ARGS=--peers`, the peers'
// benchmark harness, which scripts/bench.ts copies to a temporary folder with this file in its
// adapters/, so Stepwise runs the very scenarios the peers ran, timed the same way. Needs
// STEPWISE_ROOT (the repository) and a build in STEPWISE_DIST (default STEPWISE_ROOT/dist; `make bench`
// builds into .bench-dist/).
//
// Producers schedule over HTTP through the public API: each producer process starts its own
// `stepwise serve` process on the benchmark's database and calls POST /api/v1/executions with
// keep-alive connections. The worker role runs Stepwise's Worker in-process, so the handler can call
// the harness's onStart() first thing.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

const ROOT = process.env.STEPWISE_ROOT;
if (!ROOT) throw new Error('STEPWISE_ROOT must point at the stepwise repository');
const DIST = process.env.STEPWISE_DIST || path.join(ROOT, 'dist');
const require = createRequire(path.join(ROOT, 'package.json'));
const dist = (p) => require(path.join(DIST, p));
// Loaded with the adapter, as the harness's timings start "after imports" (the peers' adapters load
// their packages inside worker(), so their S2/S3 times include a module load that ours do not: about
// 0.2-0.5 s on this machine, for a drain of a few seconds).
const { defineTask, schedule, Worker } = dist('index.js');
const { createDb } = dist('store/db.js');
const { createLogger } = dist('logger.js');
const TASK = { noop: 'bench-noop', steps3: 'bench-steps3' };
const WORKER_POOL = Number(process.env.STEPWISE_BENCH_WORKER_POOL ?? 8);
const API_POOL = Number(process.env.STEPWISE_BENCH_API_POOL ?? 8);

/**
 * The variants of the flow-control claim-cost benchmark (scripts/bench/flow.ts), by name: the task
 * each one schedules and drains (its flow options), and what each schedule carries. `plain` is S2
 * itself and `priority` S2's task scheduled with mixed priorities; the others are tasks of their own,
 * which the worker serves alone (a worker that serves a throttled task claims it apart, see Worker).
 * Keys spread over `tenants` values ('t000'..), round-robin in schedule order.
 */
export const FLOW_VARIANTS = {
  plain: { task: TASK.noop, flow: null, describe: 'S2 as is: no flow control, priority 0' },
  keyed: { task: 'bench-flow-keyed', flow: { concurrency: { limit: 32, key: '/tenant' } }, tenants: 100, describe: "concurrency { limit: 32, key: '/tenant' }, 100 tenants" },
  'unkeyed-limit': { task: 'bench-flow-limit', flow: { concurrency: { limit: 32 } }, describe: 'concurrency { limit: 32 }' },
  rate: { task: 'bench-flow-rate', flow: { rateLimit: { limit: 1000000, period: '1s' } }, describe: "rateLimit { limit: 1,000,000, period: '1s' } (never binds)" },
  'rate-keyed': {
    task: 'bench-flow-rate-keyed',
    flow: { rateLimit: { limit: 1000000, period: '1s', key: '/tenant' } },
    tenants: 100,
    describe: "rateLimit { limit: 1,000,000, period: '1s', key: '/tenant' }, 100 tenants (never binds)",
  },
  priority: { task: TASK.noop, flow: null, priorities: 10, describe: 'S2 task, priorities 0..9 round-robin' },
};

/** The task name a kind schedules: S2/S3's kinds, or a flow variant's. */
const taskOf = (kind) => TASK[kind] ?? FLOW_VARIANTS[kind]?.task ?? TASK.noop;

/** What the i-th schedule of a kind adds to S2's payload ({ i, t }), and its schedule options. */
export function scheduleShape(kind, i) {
  const v = FLOW_VARIANTS[kind];
  return {
    data: v?.tenants ? { tenant: `t${String(i % v.tenants).padStart(3, '0')}` } : {},
    options: v?.priorities ? { priority: i % v.priorities } : {},
  };
}

/**
 * The tasks a process defines: S2/S3's two, or, for a flow variant with a task of its own, that task
 * alone (with its flow options), or with S2/S3's two for `setup`, which registers them all.
 */
function benchTasks(onStart = () => {}, kind = undefined, withBase = false) {
  const base = [
    defineTask({
      name: TASK.noop,
      async run(_ctx, data) {
        onStart(data);
        return null;
      },
    }),
    defineTask({
      name: TASK.steps3,
      async run(ctx, data) {
        onStart(data);
        let x = 0;
        x = await ctx.step('a', () => x + 1);
        x = await ctx.step('b', () => x + 1);
        x = await ctx.step('c', () => x + 1);
        return x;
      },
    }),
  ];
  const v = FLOW_VARIANTS[kind];
  if (!v?.flow) return base;
  const own = defineTask({
    name: v.task,
    ...v.flow,
    async run(_ctx, data) {
      onStart(data);
      return null;
    },
  });
  return withBase ? [...base, own] : [own];
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function request(agent, port, method, urlPath, body) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = http.request(
      { host: '127.0.0.1', port, method, path: urlPath, agent, headers: payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {} },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          if (res.statusCode >= 400) reject(new Error(`HTTP ${res.statusCode}: ${text}`));
          else resolve(text ? JSON.parse(text) : null);
        });
      },
    );
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}

/** Starts `stepwise serve` on the database and waits for /readyz. */
export async function startApiProcess(url) {
  const port = await freePort();
  // The build's CLI itself (not bin/stepwise.js, which picks dist/ or the source by itself).
  const cli = JSON.stringify(path.join(DIST, 'cli.js'));
  const main = `require(${cli}).main(['node', 'stepwise', ...process.argv.slice(1)]).catch((e) => { console.error(e); process.exit(1); })`;
  const child = spawn(process.execPath, ['-e', main, 'serve'], {
    env: { ...process.env, DATABASE_URL: url, PORT: String(port), LOG_LEVEL: 'warn', STEPWISE_DB_POOL_MAX: String(API_POOL) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const deadline = Date.now() + 30000;
  for (;;) {
    try {
      await request(agent, port, 'GET', '/readyz');
      break;
    } catch (err) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`stepwise serve did not become ready: ${err.message}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    port,
    agent,
    async close() {
      agent.destroy();
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
    },
  };
}

/**
 * The variant `sql` schedules as graphile-worker's and pg-boss's producers do: from TypeScript, with a
 * statement on the producer's own pg pool (the SDK's schedule(), which also runs inside a caller's
 * transaction), no API server between. The default schedules over HTTP through the public API.
 */
export function make(variant) {
  if (variant !== undefined && variant !== 'sql') throw new Error(`unknown stepwise variant "${variant}" (known: sql)`);
  const pkg = require(path.join(ROOT, 'package.json'));
  const byName = new Map(Object.keys(FLOW_VARIANTS).flatMap((k) => benchTasks(undefined, k, true)).map((t) => [t.name, t]));
  return {
    name: variant ? `stepwise:${variant}` : 'stepwise',
    version: `stepwise ${pkg.version}`,
    supports: { bulk: false, steps: true },
    settings: {
      schedule: variant
        ? "schedule() from the SDK on the producer's pg.Pool (max 32): one INSERT per call, no API server"
        : 'HTTP POST /api/v1/executions to a separate `stepwise serve` process (keep-alive); concurrent requests share one INSERT (group commit)',
      worker: `Worker concurrency 32, automatic prefetch (default: what it starts in 20 ms, 2-8 x concurrency), pool ${WORKER_POOL}; batched claims (FOR UPDATE SKIP LOCKED), completions group-committed with the next claim in one statement, group-committed step records; SDK loaded with the adapter, before t_start`,
      apiPool: API_POOL,
      wakeup: 'LISTEN/NOTIFY, 1 s poll fallback',
      durability: 'synchronous_commit on (server default); every step result committed before the handler goes on',
    },

    // `kind`: also register a flow variant's task (its keys are computed from the registration when
    // an execution is scheduled).
    async setup(url, { kind } = {}) {
      const { migrateLatest } = dist('store/migrate.js');
      const { upsertTasks } = dist('store/tasks.js');
      const { TaskRegistry } = dist('engine/registry.js');
      const db = createDb({ url, poolMax: 2 });
      try {
        await migrateLatest(db);
        await upsertTasks(db, new TaskRegistry(benchTasks(undefined, kind, true)).toRegistrations());
      } finally {
        await db.destroy();
      }
    },

    async producer(url) {
      if (variant === 'sql') {
        const pool = new (require('pg').Pool)({ connectionString: url, max: 32 });
        return {
          async enqueue(payload, kind = 'noop', options = undefined) {
            return (await schedule(pool, byName.get(taskOf(kind)), payload, options)).executionId;
          },
          close: () => pool.end(),
        };
      }
      const api = await startApiProcess(url);
      return {
        async enqueue(payload, kind = 'noop', options = undefined) {
          const r = await request(api.agent, api.port, 'POST', '/api/v1/executions', { task: taskOf(kind), data: payload, ...(options?.priority !== undefined ? { priority: options.priority } : {}) });
          return r.execution_id;
        },
        close: () => api.close(),
      };
    },

    // `kind`: a flow variant's worker serves that variant's task (S2/S3's two otherwise); `observer`
    // is the Worker's (the flow benchmark counts claims with it).
    async worker(url, { concurrency = 32, onStart, kind, observer }) {
      const db = createDb({ url, poolMax: WORKER_POOL });
      const worker = new Worker({ db, databaseUrl: url, tasks: benchTasks(onStart, kind), log: createLogger({ level: 'warn', pretty: false }), concurrency, pollIntervalMs: 1000, observer });
      await worker.start();
      return {
        async stop() {
          await worker.stop();
          await db.destroy();
        },
      };
    },

    // Active rows through the indexes that hold them (running ones apart, see migration 003): on the
    // list extra's ten million rows, one count over all three statuses scanned the table for 3 s.
    async remaining(c) {
      const { rows } = await c.query(
        `select (select count(*) from stepwise.executions where status in ('pending','waiting'))::int
              + (select count(*) from stepwise.executions where status = 'running')::int as n`,
      );
      return rows[0].n;
    },
    async succeeded(c) {
      const { rows } = await c.query(`select count(*)::int as n from stepwise.executions where status = 'completed'`);
      return rows[0].n;
    },
    // `createdAfter` (epoch ms) bounds the read to the run's own executions on a table that held
    // millions before it.
    async lastCompletion(c, createdAfter = 0) {
      const { rows } = await c.query(
        `select extract(epoch from max(completed_at))*1000 as t from stepwise.executions where created_at >= to_timestamp($1 / 1000.0) and status <> 'running'`,
        [createdAfter],
      );
      return rows[0].t == null ? null : Number(rows[0].t);
    },
    async doneAmong(c, ids) {
      const { rows } = await c.query(`select id::text from stepwise.executions where id = any($1::uuid[]) and status = 'completed'`, [ids]);
      return rows.map((r) => r.id);
    },
  };
}
