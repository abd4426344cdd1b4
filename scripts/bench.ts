// `make bench`: runs the peers' benchmark harness (S1-S4) with Stepwise's adapter, optionally the peers
// themselves in the same run (--peers), then Stepwise's own extra scenarios; prints a table and writes
// bench-results/<timestamp>.json. Uses the PostgreSQL at PGHOST:PGPORT (default 127.0.0.1:5432) when
// one answers, else an embedded one.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { SingleBar, Presets } from 'cli-progress';
import { startEmbeddedPostgres } from '../src/store/embedded';
import { runExtras, type ExtraResult } from './bench/extras';

const ROOT = path.join(__dirname, '..');

interface Options {
  reps: string;
  scenarios: string;
  peers: boolean;
  extras: boolean;
  n?: string;
  listRows: string;
  longPolls: string;
  peersBench: string;
  harnessResults?: string;
}

function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.setTimeout(1000);
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
    s.once('timeout', () => (s.destroy(), resolve(false)));
  });
}

/** Copies the harness to a temporary folder with Stepwise's adapter registered in it. */
function prepareHarness(source: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-bench-'));
  cpSync(source, dir, { recursive: true, filter: (p) => !p.includes(`${path.sep}results${path.sep}`) });
  execFileSync('chmod', ['-R', 'u+w', dir]);
  cpSync(path.join(__dirname, 'bench', 'stepwise-adapter.mjs'), path.join(dir, 'adapters', 'stepwise.mjs'));
  const index = path.join(dir, 'adapters', 'index.mjs');
  const text = readFileSync(index, 'utf8').replace('export const PEERS = {', "export const PEERS = {\n  stepwise: () => import('./stepwise.mjs'),");
  writeFileSync(index, text);
  return dir;
}

/** The harness loads `pg` from $PEERS_DIR/harness; for Stepwise alone, ours will do. */
function ensureHarnessPg(peersDir: string): void {
  const harness = path.join(peersDir, 'harness');
  if (existsSync(path.join(harness, 'node_modules', 'pg'))) return;
  mkdirSync(harness, { recursive: true });
  writeFileSync(path.join(harness, 'package.json'), '{"name":"harness","private":true}');
  if (!existsSync(path.join(harness, 'node_modules'))) symlinkSync(path.join(ROOT, 'node_modules'), path.join(harness, 'node_modules'));
}

interface HarnessLine {
  peer: string;
  scenario: string;
  median?: Record<string, number>;
  skipped?: string;
  error?: string;
}

async function runHarness(dir: string, peer: string, scenarios: string[], reps: number, env: NodeJS.ProcessEnv, n: string | undefined, bar: SingleBar): Promise<HarnessLine[]> {
  const lines: HarnessLine[] = [];
  for (const s of scenarios) {
    const args = [path.join(dir, 'run.mjs'), peer, s, '--reps', String(reps), ...(n ? ['--n', n] : [])];
    const out = await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'inherit'] });
      let text = '';
      child.stdout.on('data', (d: Buffer) => (text += d.toString()));
      child.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`harness ${peer} ${s} exited ${code}: ${text}`))));
    });
    for (const line of out.split('\n')) {
      if (!line.startsWith('{')) continue;
      const parsed = JSON.parse(line) as HarnessLine;
      if (parsed.scenario) lines.push(parsed); // the API server's own log lines share stdout
    }
    bar.increment(1, { step: `${peer} ${s}` });
  }
  return lines;
}

const TARGETS: Record<string, { key: string; label: string; target: string; better: 'higher' | 'lower' }[]> = {
  S1: [{ key: 'single_jobs_s', label: 'S1 schedule, one at a time, 32 in flight (per s)', target: '>= 3000', better: 'higher' }],
  S2: [{ key: 'completed_s', label: 'S2 drain 10,000 no-op, concurrency 32 (per s)', target: '>= 15000', better: 'higher' }],
  S3: [{ key: 'completed_s', label: 'S3 2,000 x 3-step workflows (per s)', target: '>= 1600', better: 'higher' }],
  S4: [
    { key: 'start_p50_ms', label: 'S4 schedule -> handler start p50 (ms)', target: '<= 2.5', better: 'lower' },
    { key: 'start_p99_ms', label: 'S4 schedule -> handler start p99 (ms)', target: '<= 7', better: 'lower' },
  ],
};

function table(lines: HarnessLine[], extras: ExtraResult[]): string {
  const peers = [...new Set(lines.map((l) => l.peer).filter((p): p is string => typeof p === 'string'))];
  const rows: string[][] = [['scenario', ...peers, 'target']];
  for (const [s, metrics] of Object.entries(TARGETS)) {
    for (const m of metrics) {
      rows.push([
        m.label,
        ...peers.map((p) => {
          const line = lines.find((l) => l.peer === p && l.scenario === s);
          const v = line?.median?.[m.key];
          return !line || line.skipped ? '-' : v === undefined ? 'n/a' : String(v);
        }),
        m.target,
      ]);
    }
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const fmt = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  const out = [fmt(rows[0]), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(fmt)];
  if (extras.length) {
    out.push('', 'Stepwise extras:');
    for (const e of extras) out.push(`- ${e.label}: ${e.summary}`);
  }
  return out.join('\n');
}

async function main(): Promise<void> {
  const program = new Command('bench')
    .option('--reps <n>', 'repetitions per scenario (medians are reported)', '3')
    .option('--scenarios <list>', 'harness scenarios to run', 'S1,S2,S3,S4')
    .option('--peers', 'also run the peers (graphile-worker, pg-boss, DBOS, pg-workflows, and graphile-worker:batched in S2) in this run; installs them outside the repo', false)
    .option('--no-extras', 'skip Stepwise-only scenarios')
    .option('--n <n>', 'override the job count of S1-S3 (quick runs)')
    .option('--list-rows <n>', 'rows for the list-with-total scenario', '1000000')
    .option('--long-polls <n>', 'concurrent long-polls held by one API process', '10000')
    .option('--peers-bench <dir>', 'the peers harness', path.join(ROOT, '..', 'shared', 'peers-bench'))
    .option('--harness-results <dir>', 'reuse the harness results (*.jsonl) of an earlier run instead of running S1-S4')
    .parse(process.argv);
  const opts = program.opts<Options>();
  process.stdout.write('building dist/ ...\n');
  execFileSync(path.join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });

  const env: NodeJS.ProcessEnv = { ...process.env, STEPWISE_ROOT: ROOT, PEERS_DIR: process.env.PEERS_DIR ?? path.join(os.tmpdir(), 'peers') };
  let embedded: Awaited<ReturnType<typeof startEmbeddedPostgres>> | undefined;
  const host = process.env.PGHOST ?? '127.0.0.1';
  const port = Number(process.env.PGPORT ?? 5432);
  if (!(await reachable(host, port))) {
    process.stdout.write('no PostgreSQL at PGHOST:PGPORT; starting an embedded one\n');
    embedded = await startEmbeddedPostgres({ dataDir: path.join(os.tmpdir(), `stepwise-bench-pg-${process.pid}`, 'pgdata') });
    Object.assign(env, { PGHOST: '127.0.0.1', PGPORT: String(embedded.port), PGUSER: 'postgres', PGPASSWORD: 'postgres' });
  }
  const scenarios = opts.harnessResults ? [] : opts.scenarios.split(',').filter(Boolean);
  const peers = ['stepwise', ...(opts.peers ? ['graphile-worker', 'pg-boss', 'dbos', 'pg-workflows'] : [])];
  const harness = prepareHarness(opts.peersBench);
  env.PB_RESULTS = path.join(harness, 'results');
  if (opts.peers) execFileSync('bash', [path.join(harness, 'setup.sh')], { env, stdio: 'inherit' });
  else ensureHarnessPg(env.PEERS_DIR as string);

  const lines: HarnessLine[] = [];
  const bar = new SingleBar({ format: 'bench [{bar}] {value}/{total} {step}', noTTYOutput: true, notTTYSchedule: 5000 }, Presets.shades_classic);
  // graphile-worker's batched-completion variant is the S2 anchor: run it beside the defaults.
  const variantScenarios = opts.peers ? scenarios.filter((s) => s === 'S2') : [];
  // S4 once more with Stepwise scheduling as the peers' producers do (direct SQL through the SDK's
  // schedule(), no API server), so that each is compared with its like.
  const sqlScenarios = scenarios.filter((s) => s === 'S4');
  bar.start(peers.length * scenarios.length + variantScenarios.length + sqlScenarios.length + (opts.extras ? 6 : 0), 0, { step: 'starting' });
  let extras: ExtraResult[] = [];
  if (opts.harnessResults) {
    for (const f of readdirSync(opts.harnessResults).filter((x) => x.endsWith('.jsonl'))) {
      for (const line of readFileSync(path.join(opts.harnessResults, f), 'utf8').trim().split('\n')) if (line) lines.push(JSON.parse(line) as HarnessLine);
    }
  }
  try {
    for (const peer of peers) lines.push(...(await runHarness(harness, peer, scenarios, Number(opts.reps), env, opts.n, bar)));
    if (sqlScenarios.length > 0) lines.push(...(await runHarness(harness, 'stepwise:sql', sqlScenarios, Number(opts.reps), env, opts.n, bar)));
    if (variantScenarios.length > 0) lines.push(...(await runHarness(harness, 'graphile-worker:batched', variantScenarios, Number(opts.reps), env, opts.n, bar)));
    if (opts.extras) {
      extras = await runExtras({
        env,
        listRows: Number(opts.listRows),
        longPolls: Number(opts.longPolls),
        progress: (step) => bar.increment(1, { step }),
      });
    }
  } finally {
    bar.stop();
    await embedded?.stop();
    rmSync(harness, { recursive: true, force: true });
  }
  const result = { at: new Date().toISOString(), host: { cpus: os.cpus().length, node: process.version, postgres: embedded ? 'embedded' : `${host}:${port}` }, reps: Number(opts.reps), harness: lines, extras };
  mkdirSync(path.join(ROOT, 'bench-results'), { recursive: true });
  const file = path.join(ROOT, 'bench-results', `bench-${result.at.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(result, null, 2));
  for (const l of lines) if (l.error || !l.median) process.stdout.write(`note: ${JSON.stringify(l).slice(0, 400)}\n`);
  process.stdout.write(`\n${table(lines, extras)}\n\nresults: ${path.relative(process.cwd(), file)}\n`);
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${(err as Error).stack}\n`);
  process.exit(1);
});
