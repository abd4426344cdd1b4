// `make scale`: many processes on one database. Two API servers and 1, 2 and 4 worker processes at the
// same total concurrency, each configuration on a fresh database: a mixed backlog (no-op executions
// and executions of three steps) is scheduled over HTTP through both API servers, then drained by the
// workers. Reports throughput, claim statements per execution and the share that came back empty
// (from the workers' own /metrics), PostgreSQL's CPU per execution and in cores, and whether every
// execution completed. Uses the PostgreSQL at PGHOST:PGPORT (default 127.0.0.1:5432) when one
// answers, else an embedded one; compiled code from .bench-dist/, as `make bench`.
//
//   make scale ARGS="--n 20000 --concurrency 32 --workers 1,2,4 --reps 2"
//
// With `--pgbouncer <size>`, every process's pool goes through one PgBouncer in transaction mode with
// that many server connections (LISTEN stays direct), to compare a pooler with small direct pools.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { startEmbeddedPostgres, findFreePort } from '../src/store/embedded';
import { queryRows } from '../src/store/db';
import { maintainedCountSql } from '../src/store/execution-counts';
import { upsertTasks } from '../src/store/tasks';
import { TaskRegistry } from '../src/engine/registry';
import { loadTasksModule } from '../src/engine/registry';
import { buildForBench, ROOT, stepwiseArgs } from './bench/build';
import { freshDatabase } from './bench/extras';
import { pgCostBetween, pgSnapshot, processCpuMs } from './bench/pg-cost';
import { reachable } from './bench/reachable';
import { findPgBouncer, startPgBouncer, type TestPgBouncer } from '../test/helpers/pgbouncer';

const TASKS_FILE = path.join(ROOT, 'scripts', 'bench', 'scale-tasks.ts');
/** The mix: most executions are no-ops (claim-bound), the rest write three steps each. */
const STEPS_SHARE = 0.3;
const TASKS = ['scale-noop', 'scale-steps'];

interface Options {
  pgbouncer?: string;
  n: string;
  concurrency: string;
  workers: string;
  reps: string;
}

interface Row {
  workers: number;
  perWorker: number;
  rep: number;
  perSecond: number;
  claimsPerExecution: number;
  emptyShare: number;
  pgCpuMsPerExecution: number | null;
  pgCores: number | null;
  /** Transactions the database ran per execution: statements outside a transaction count one each. */
  transactionsPerExecution: number;
  /** CPU of the worker processes together, per execution. */
  workerCpuMsPerExecution: number;
  completed: number;
  n: number;
}

function post(port: number, pathName: string, body: unknown, agent: http.Agent): Promise<number> {
  return new Promise((resolve, reject) => {
    const payload = Buffer.from(JSON.stringify(body));
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: pathName, agent, headers: { 'content-type': 'application/json', 'content-length': payload.length } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

function get(port: number, pathName: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: pathName }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      })
      .on('error', reject);
  });
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A `stepwise` process of the benchmark's build; resolves once it is ready. */
async function startProcess(dist: string, args: string[], env: NodeJS.ProcessEnv, readyPort: number, readyPath: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, stepwiseArgs(dist, args), { env: { ...process.env, ...env, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'ignore', 'inherit'] });
  await until(async () => (await get(readyPort, readyPath)).status === 200, `${args[0]} on port ${readyPort}`);
  return child;
}

async function stop(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null) return resolve();
          const timer = setTimeout(() => c.kill('SIGKILL'), 15_000);
          c.once('exit', () => (clearTimeout(timer), resolve()));
          c.kill('SIGTERM');
        }),
    ),
  );
}

/** Sums a counter of a Prometheus text exposition, over the label `result` when given. */
function counter(text: string, name: string, result?: string): number {
  return text
    .split('\n')
    .filter((l) => l.startsWith(name) && (result === undefined || l.includes(`result="${result}"`)))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

async function runConfiguration(env: NodeJS.ProcessEnv, dist: string, workers: number, concurrency: number, n: number, rep: number, bouncer: TestPgBouncer | undefined): Promise<Row> {
  const t = await freshDatabase(env);
  const children: ChildProcess[] = [];
  // Through PgBouncer: the pools go through it, LISTEN straight to PostgreSQL.
  const database = bouncer ? { DATABASE_URL: bouncer.pooledUrl(t.url), STEPWISE_DB_POOLER: 'transaction', STEPWISE_LISTEN_URL: t.url } : { DATABASE_URL: t.url };
  try {
    await upsertTasks(t.db, new TaskRegistry(await loadTasksModule(TASKS_FILE)).toRegistrations());
    const apiPorts = [await findFreePort(), await findFreePort()];
    for (const port of apiPorts) children.push(await startProcess(dist, ['serve'], { ...database, PORT: String(port) }, port, '/readyz'));
    // The backlog, through both API servers, 64 requests in flight.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
    let next = 0;
    const lane = async () => {
      while (next < n) {
        const i = next++;
        const task = i % 10 < STEPS_SHARE * 10 ? 'scale-steps' : 'scale-noop';
        const status = await post(apiPorts[i % 2], '/api/v1/executions', { task, data: { i } }, agent);
        if (status !== 201) throw new Error(`schedule answered ${status}`);
      }
    };
    await Promise.all(Array.from({ length: 64 }, lane));
    agent.destroy();
    // Paused while the workers start (together), so that the drain is timed from a common start.
    for (const task of TASKS) await post(apiPorts[0], `/api/v1/tasks/${task}/pause`, {}, new http.Agent());
    const metricsPorts = await Promise.all(Array.from({ length: workers }, () => findFreePort()));
    const workerProcesses = await Promise.all(
      metricsPorts.map((port) =>
        startProcess(dist, ['worker', '--tasks', TASKS_FILE, '--concurrency', String(concurrency / workers)], { ...database, STEPWISE_METRICS_PORT: String(port) }, port, '/metrics'),
      ),
    );
    children.push(...workerProcesses);
    const workerCpuMs = () => workerProcesses.reduce((sum, c) => sum + processCpuMs(c.pid as number), 0);
    // The claims the paused workers made (all empty) are taken off below.
    const idle = await Promise.all(metricsPorts.map(async (p) => (await get(p, '/metrics')).text));
    const before = await pgSnapshot(t.url);
    const workerCpuBefore = workerCpuMs();
    const started = Date.now();
    for (const task of TASKS) await post(apiPorts[0], `/api/v1/tasks/${task}/resume`, {}, new http.Agent());
    // The maintained count, not count(*): counting the finished rows every 50 ms cost PostgreSQL CPU
    // that grew with the table, taken from the system under test and billed to it.
    const completedCount = maintainedCountSql({ status: 'completed' });
    let completed = 0;
    await until(
      async () => {
        [{ completed }] = await queryRows<{ completed: number }>(t.db, `SELECT ${completedCount.sql}::int AS completed`, completedCount.bindings);
        return completed >= n;
      },
      `${n} executions to complete`,
      600_000,
    );
    const seconds = (Date.now() - started) / 1000;
    const workerCpu = workerCpuMs() - workerCpuBefore;
    const scraped = await Promise.all(metricsPorts.map(async (p) => (await get(p, '/metrics')).text));
    const sum = (texts: string[], result?: string) => texts.reduce((s, text) => s + counter(text, 'stepwise_claims_total', result), 0);
    const claims = sum(scraped) - sum(idle);
    const empty = sum(scraped, 'empty') - sum(idle, 'empty');
    await stop(children.splice(0));
    const after = await pgSnapshot(t.url);
    const cost = await pgCostBetween(t.url, before, after);
    return {
      workers,
      perWorker: concurrency / workers,
      rep,
      perSecond: Math.round(n / seconds),
      claimsPerExecution: Math.round((claims / n) * 1000) / 1000,
      emptyShare: claims === 0 ? 0 : Math.round((empty / claims) * 1000) / 1000,
      pgCpuMsPerExecution: cost.cpuMs === null ? null : Math.round((cost.cpuMs / n) * 1000) / 1000,
      pgCores: cost.cpuMs === null ? null : Math.round((cost.cpuMs / 1000 / seconds) * 100) / 100,
      transactionsPerExecution: Math.round((cost.transactions / n) * 100) / 100,
      workerCpuMsPerExecution: Math.round((workerCpu / n) * 1000) / 1000,
      completed,
      n,
    };
  } finally {
    await stop(children);
    await t.drop();
  }
}

async function main(): Promise<void> {
  const opts = new Command()
    .option('--n <count>', 'executions per configuration', '20000')
    .option('--concurrency <total>', 'total handler slots, split evenly over the worker processes', '32')
    .option('--workers <list>', 'worker process counts to compare', '1,2,4')
    .option('--reps <count>', 'runs of each configuration, interleaved', '2')
    .option('--pgbouncer <size>', 'run every pool through one PgBouncer (transaction mode) with this many server connections')
    .parse()
    .opts<Options>();
  const counts = opts.workers.split(',').map(Number);
  const concurrency = Number(opts.concurrency);
  if (counts.some((w) => !Number.isInteger(w) || w < 1 || concurrency % w !== 0)) throw new Error(`--workers: each count must divide --concurrency ${concurrency}`);
  process.stdout.write('building .bench-dist/ ...\n');
  const dist = buildForBench();
  const env: NodeJS.ProcessEnv = { ...process.env };
  let embeddedDir: string | undefined;
  let embedded: Awaited<ReturnType<typeof startEmbeddedPostgres>> | undefined;
  if (!(await reachable(env.PGHOST ?? '127.0.0.1', Number(env.PGPORT ?? 5432)))) {
    embeddedDir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-scale-pg-'));
    embedded = await startEmbeddedPostgres({ dataDir: path.join(embeddedDir, 'pgdata'), database: 'postgres' });
    Object.assign(env, { PGHOST: '127.0.0.1', PGPORT: String(embedded.port), PGUSER: 'postgres', PGPASSWORD: 'postgres' });
  }
  const rows: Row[] = [];
  let bouncer: TestPgBouncer | undefined;
  try {
    if (opts.pgbouncer !== undefined) {
      const binary = findPgBouncer();
      if (!binary) throw new Error('pgbouncer is not installed: run scripts/install-pgbouncer.sh');
      const user = encodeURIComponent(env.PGUSER ?? 'postgres');
      const password = encodeURIComponent(env.PGPASSWORD ?? 'postgres');
      bouncer = await startPgBouncer(binary, { serverUrl: `postgres://${user}:${password}@${env.PGHOST ?? '127.0.0.1'}:${env.PGPORT ?? 5432}/postgres`, poolSize: Number(opts.pgbouncer) });
      process.stdout.write(`through PgBouncer, ${opts.pgbouncer} server connections per database\n`);
    }
    // Interleaved: rep 1 of every configuration, then rep 2, so a drift of the machine's speed is shared.
    for (let rep = 1; rep <= Number(opts.reps); rep++) {
      for (const workers of counts) {
        process.stdout.write(`rep ${rep}: 2 API servers, ${workers} worker(s) x ${concurrency / workers} ...\n`);
        rows.push(await runConfiguration(env, dist, workers, concurrency, Number(opts.n), rep, bouncer));
      }
    }
  } finally {
    await bouncer?.stop();
    await embedded?.stop();
    if (embeddedDir) rmSync(embeddedDir, { recursive: true, force: true });
  }
  const lines = [
    `| workers × slots | rep | executions/s | claims per execution | empty claims | transactions per execution | PostgreSQL CPU per execution | PostgreSQL cores busy | workers' CPU per execution | completed |`,
    `|---|---|---|---|---|---|---|---|---|---|`,
    ...rows.map(
      (r) =>
        `| ${r.workers} × ${r.perWorker} | ${r.rep} | ${r.perSecond.toLocaleString('en-US')} | ${r.claimsPerExecution} | ${(r.emptyShare * 100).toFixed(1)} % | ${r.transactionsPerExecution} | ${r.pgCpuMsPerExecution ?? 'n/a'} ms | ${r.pgCores ?? 'n/a'} | ${r.workerCpuMsPerExecution} ms | ${r.completed}/${r.n} |`,
    ),
  ];
  process.stdout.write(`\n${lines.join('\n')}\n`);
  const lost = rows.filter((r) => r.completed !== r.n);
  mkdirSync(path.join(ROOT, 'bench-results'), { recursive: true });
  const file = path.join(ROOT, 'bench-results', `scale-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify({ n: Number(opts.n), concurrency, stepsShare: STEPS_SHARE, pgbouncerPoolSize: opts.pgbouncer === undefined ? null : Number(opts.pgbouncer), rows }, null, 2));
  process.stdout.write(`\nwritten to ${path.relative(ROOT, file)}\n`);
  if (lost.length > 0) {
    process.stdout.write(`LOST: ${lost.map((r) => `${r.workers} workers rep ${r.rep}: ${r.completed}/${r.n}`).join('; ')}\n`);
    process.exitCode = 1;
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
