// `make soak`: steady mixed load (the chaos task mix, no faults) against a real `stepwise serve` and two
// `stepwise worker` processes on PostgreSQL (embedded unless DATABASE_URL is set). Every few seconds it
// samples the RSS of each process, the database connections by application_name, the API's event-loop
// lag (prom-client's nodejs_eventloop_lag_seconds from /metrics) and the throughput; it prints them
// over time and a verdict per series: flat, or growing when the least-squares slope after warm-up
// passes a threshold. A run of a minute or two still sees V8's heaps warm up (workers climb by 10-15 MB
// and settle within about two minutes here), so take a leak verdict from --duration 4m or more; with
// --strict a growing series exits 1. Writes chaos-results/soak-<time>.json.
//
//   make soak                                    60 s
//   make soak ARGS="--duration 10m --interval 10s --flows 50"
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Command } from 'commander';
import pg from 'pg';
import { parseDuration } from '../src/domain/duration';
import { createDb } from '../src/store/db';
import { findFreePort } from '../src/store/embedded';
import { migrateLatest } from '../src/store/migrate';
import { compileForRun } from './chaos/build';
import { ChaosDriver } from './chaos/driver';
import { planExecutions } from './chaos/outcomes';
import { apiProcess, createDatabase, dropDatabase, externalServer, ROOT, startEmbeddedServer, workerProcess } from './chaos/processes';

const TOKEN = 'soak-token';

interface Sample {
  atS: number;
  apiRssMb: number;
  workerRssMb: number[];
  connections: Record<string, number>;
  apiLagMs: number;
  soakLagMs: number;
  finished: number;
  perSecond: number;
}

function rssMb(pid: number | undefined): number {
  if (!pid) return NaN;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 102.4) / 10 : NaN;
  } catch {
    return NaN;
  }
}

async function metric(url: string, name: string): Promise<number> {
  try {
    const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
    const m = new RegExp(`^${name} ([0-9.eE+-]+)$`, 'm').exec(text);
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

/** Least-squares slope of y over x. */
function slope(points: Array<[number, number]>): number {
  const pts = points.filter(([, y]) => Number.isFinite(y));
  if (pts.length < 3) return 0;
  const mx = pts.reduce((s, [x]) => s + x, 0) / pts.length;
  const my = pts.reduce((s, [, y]) => s + y, 0) / pts.length;
  const num = pts.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0);
  const den = pts.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  return den === 0 ? 0 : num / den;
}

async function main(): Promise<void> {
  const opts = new Command('soak')
    .option('--duration <d>', 'how long to load (60s, 10m)', '60s')
    .option('--interval <d>', 'sampling interval', '5s')
    .option('--flows <n>', 'client flows in flight', '40')
    .option('--rss-mb-per-min <n>', 'RSS growth counted as a leak', '8')
    .option('--strict', 'exit 1 when a series grows')
    .parse()
    .opts<{ duration: string; interval: string; flows: string; rssMbPerMin: string; strict?: boolean }>();
  const durationMs = parseDuration(opts.duration, '--duration');
  const intervalMs = parseDuration(opts.interval, '--interval');
  const runId = `soak-${Date.now().toString(36)}`;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-soak-'));
  chmodSync(dir, 0o755);
  const server = process.env.DATABASE_URL ? externalServer(process.env.DATABASE_URL) : await startEmbeddedServer(path.join(dir, 'pg'));
  const dbName = `stepwise_${runId.replace(/-/g, '_')}`;
  const url = await createDatabase(server.adminUrl, dbName);
  const m = createDb({ url, poolMax: 1 });
  await migrateLatest(m);
  await m.destroy();
  const sourceTasks = path.join(ROOT, 'scripts', 'chaos', 'tasks.ts');
  const compiled = compileForRun(`soak-build-${runId}`, [sourceTasks]);
  const port = await findFreePort();
  const env = { DATABASE_URL: url, STEPWISE_API_TOKENS: TOKEN, STEPWISE_POLL_INTERVAL_MS: '250', CHAOS_EFFECTS_DIR: path.join(dir, 'effects') };
  const api = apiProcess(port, env, path.join(dir, 'logs'), compiled.bin);
  const workers = [1, 2].map((i) => workerProcess(`worker-${i}`, compiled.tasks[sourceTasks], env, path.join(dir, 'logs'), 16, compiled.bin));
  const stopAll = async () => {
    for (const p of [api, ...workers]) await p.stop().catch(() => undefined);
    await server.stop().catch(() => undefined);
    compiled.remove();
  };
  process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
  await Promise.all([api, ...workers].map((p) => p.start()));
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();

  const started = Date.now();
  const baseUrl = `http://127.0.0.1:${port}`;
  const driver = new ChaosDriver(baseUrl, TOKEN, started + durationMs + 120000);
  // Cancels and failures are part of the mix; the long event timeouts are not (no one would end them here).
  let seed = 1;
  const nextPlan = (i: number) => {
    const [plan] = planExecutions(1, seed++, `${runId}-${i}`);
    return plan;
  };
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const samples: Sample[] = [];
  let lastFinished = 0;
  const header = `${'t (s)'.padStart(6)} ${'api MB'.padStart(7)} ${'worker MB'.padStart(13)} ${'db conns'.padStart(22)} ${'api lag ms'.padStart(10)} ${'done'.padStart(7)} ${'/s'.padStart(6)}`;
  process.stdout.write(`soak ${runId}: ${opts.duration}, sampling every ${opts.interval}, ${opts.flows} flows\n${header}\n`);
  const sampler = setInterval(() => {
    void (async () => {
      const { rows } = await admin.query<{ application_name: string; n: number }>(
        'SELECT application_name, count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() GROUP BY 1 ORDER BY 1',
        [dbName],
      );
      const s: Sample = {
        atS: Math.round((Date.now() - started) / 1000),
        apiRssMb: rssMb(api.pid),
        workerRssMb: workers.map((w) => rssMb(w.pid)),
        connections: Object.fromEntries(rows.map((r) => [r.application_name || '?', r.n])),
        apiLagMs: Math.round((await metric(baseUrl, 'nodejs_eventloop_lag_seconds')) * 10000) / 10,
        soakLagMs: Math.round(loop.percentile(99) / 1e5) / 10,
        finished: driver.stats.finished,
        perSecond: Math.round(((driver.stats.finished - lastFinished) / intervalMs) * 10000) / 10,
      };
      lastFinished = driver.stats.finished;
      loop.reset();
      samples.push(s);
      const conns = Object.entries(s.connections).map(([k, v]) => `${k.replace('stepwise-', '')}:${v}`).join(' ');
      process.stdout.write(
        `${String(s.atS).padStart(6)} ${s.apiRssMb.toFixed(1).padStart(7)} ${s.workerRssMb.map((r) => r.toFixed(1)).join('/').padStart(13)} ${conns.padStart(22)} ${String(s.apiLagMs).padStart(10)} ${String(s.finished).padStart(7)} ${String(s.perSecond).padStart(6)}\n`,
      );
    })().catch((err: Error) => process.stderr.write(`sample failed: ${err.message}\n`));
  }, intervalMs);
  const results = await driver.runUntil(nextPlan, Number(opts.flows), started + durationMs);
  clearInterval(sampler);
  await admin.end();

  // Verdict on the samples after a warm-up (the first quarter): slopes per minute.
  const steady = samples.slice(Math.floor(samples.length / 4));
  const perMin = (pick: (s: Sample) => number) => Math.round(slope(steady.map((s) => [s.atS / 60, pick(s)])) * 10) / 10;
  const rssLimit = Number(opts.rssMbPerMin);
  const series = [
    { name: 'api RSS (MB/min)', slope: perMin((s) => s.apiRssMb), limit: rssLimit },
    ...workers.map((w, i) => ({ name: `${w.name} RSS (MB/min)`, slope: perMin((s) => s.workerRssMb[i]), limit: rssLimit })),
    { name: 'api event-loop lag (ms/min)', slope: perMin((s) => s.apiLagMs), limit: 20 },
  ].map((x) => ({ ...x, verdict: x.slope > x.limit ? 'growing' : 'flat' }));
  // Pools open connections up to their maximum on demand, so a rise to it is not a leak: the bound is
  // three pools of 10 (the default) and three LISTEN connections.
  const maxConnections = Math.max(...samples.map((s) => Object.values(s.connections).reduce((a, b) => a + b, 0)));
  series.push({ name: 'db connections (max seen)', slope: maxConnections, limit: 33, verdict: maxConnections > 33 ? 'growing' : 'flat' });
  const problems = results.filter((r) => r.problem).length;
  process.stdout.write('\nSoak verdict (least-squares slope after warm-up)\n');
  for (const x of series) process.stdout.write(`  ${x.name.padEnd(30)} ${String(x.slope).padStart(8)}  (limit ${x.limit})  ${x.verdict}\n`);
  process.stdout.write(`  executions finished            ${results.length} (${problems} with client problems)\n`);
  const ok = series.every((x) => x.verdict === 'flat') && problems === 0;
  process.stdout.write(`  ${ok ? 'PASS: flat' : 'GROWING'}${durationMs < 180000 ? ' (a short run includes heap warm-up: use --duration 4m or more for a leak verdict)' : ''}\n`);
  mkdirSync(path.join(ROOT, 'chaos-results'), { recursive: true });
  writeFileSync(path.join(ROOT, 'chaos-results', `${runId}.json`), `${JSON.stringify({ runId, durationMs, samples, series, executions: results.length, problems, ok }, null, 2)}\n`);
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
  process.exit(ok || !opts.strict ? 0 : 1);
}

main().catch((err) => {
  process.stderr.write(`soak: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
