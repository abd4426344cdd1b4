// `make bench`: Stepwise's benchmark scenarios S1-S4 (scripts/bench/scenarios.ts, on any clone), then
// its own extra scenarios; prints a table and writes bench-results/<timestamp>.json. One extra is
// opt-in (it takes minutes): the claim cost of flow control, `make bench ARGS="--scenarios=
// --extras-only flow"` (scripts/bench/flow.ts). With --peers, S1-S4
// run through the peers' benchmark harness instead, for Stepwise and for graphile-worker, pg-boss, DBOS
// and pg-workflows alike (the harness is not part of this repository: --peers-bench DIR or
// STEPWISE_PEERS_BENCH say where it is). Uses the PostgreSQL at PGHOST:PGPORT (default
// 127.0.0.1:5432) when one answers, else an embedded one. Measures a compiled build in .bench-dist/,
// never dist/ (scripts/bench/build.ts says why).
//
// A/B in one run: `make bench ARGS="--baseline REV"` (a commit, a branch, HEAD~3) builds REV aside in
// .bench-baseline/<sha>/ (scripts/bench/baseline.ts; kept for the next run) and runs S1-S4 on both
// builds alternately, a repetition at a time in an order shuffled from --seed, each on a fresh
// database (with --peers, the peers take their turns in the same rounds); it prints both medians, the
// ratios current/baseline of each repetition and their median (scripts/bench/alternate.ts). Judge a
// change on the hot path by these ratios, never against figures from another day. Quick:
// make bench ARGS="--baseline main --reps 3 --n 2000 --no-extras". Extras run on the current build only.
// `--baseline HEAD` on a clean tree is an A/A run: its ratios show the noise of the machine.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { SingleBar, Presets } from 'cli-progress';
import { startEmbeddedPostgres } from '../src/store/embedded';
import { EXTRA_NAMES, extraSteps, OPT_IN_EXTRAS, runExtras, type ExtraResult } from './bench/extras';
import { FLOW_VARIANT_NAMES, flowVariants } from './bench/flow';
import { buildForBench, ROOT } from './bench/build';
import { buildBaseline, type BaselineBuild } from './bench/baseline';
import { compare, comparisonTable, runAlternating, type Contestant, type Metric, type Pair } from './bench/alternate';
import { markdown } from './bench/markdown';
import { defaultSize, loadAdapter, runRepetition, runScenarios, scenarioSize, type Adapter, type ScenarioLine } from './bench/scenarios';
import { reachable } from './bench/reachable';

interface Options {
  reps: string;
  scenarios: string;
  peers: boolean;
  extras: boolean;
  n?: string;
  listRows: string;
  longPolls: string;
  extrasOnly?: string;
  flowVariants?: string;
  peersBench?: string;
  harnessResults?: string;
  baseline?: string;
  seed: string;
}

/** Where --peers looks for the peers' harness, in order, and why. */
function harnessCandidates(flag: string | undefined): { dir: string; from: string }[] {
  if (flag) return [{ dir: path.resolve(flag), from: '--peers-bench' }];
  const out: { dir: string; from: string }[] = [];
  if (process.env.STEPWISE_PEERS_BENCH) out.push({ dir: path.resolve(process.env.STEPWISE_PEERS_BENCH), from: 'STEPWISE_PEERS_BENCH' });
  out.push({ dir: path.join(ROOT, '..', 'shared', 'peers-bench'), from: 'the default, beside the repository' });
  return out;
}

/** The peers' harness for --peers, or an error that says what it needs and where it looked. */
function findHarness(flag: string | undefined): string {
  const candidates = harnessCandidates(flag);
  const found = candidates.find((c) => existsSync(path.join(c.dir, 'run.mjs')) && existsSync(path.join(c.dir, 'adapters', 'index.mjs')));
  if (found) return found.dir;
  throw new Error(
    [
      '--peers needs the peers\' benchmark harness, which is not part of this repository: a folder with run.mjs,',
      'adapters/index.mjs and setup.sh (setup.sh installs graphile-worker, pg-boss, DBOS and pg-workflows with npm into',
      `$PEERS_DIR, default ${path.join(os.tmpdir(), 'peers')}, so it needs the npm registry). Say where it is with`,
      '--peers-bench DIR (make bench ARGS="--peers --peers-bench DIR") or STEPWISE_PEERS_BENCH=DIR. Looked in:',
      ...candidates.map((c) => `  ${c.dir} (${c.from})`),
      'Without --peers, make bench runs Stepwise\'s own S1-S4, which need nothing else.',
    ].join('\n'),
  );
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

type HarnessLine = ScenarioLine;

/** One scenario of one peer through the harness, `reps` repetitions: its result lines. */
async function runHarnessScenario(dir: string, peer: string, s: string, reps: number, env: NodeJS.ProcessEnv, n: string | undefined): Promise<HarnessLine[]> {
  const args = [path.join(dir, 'run.mjs'), peer, s, '--reps', String(reps), ...(n ? ['--n', n] : [])];
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString()));
    child.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`harness ${peer} ${s} exited ${code}: ${text}`))));
  });
  const lines: HarnessLine[] = [];
  for (const line of out.split('\n')) {
    if (!line.startsWith('{')) continue;
    const parsed = JSON.parse(line) as HarnessLine;
    if (parsed.scenario) lines.push(parsed); // the API server's own log lines share stdout
  }
  return lines;
}

async function runHarness(dir: string, peer: string, scenarios: string[], reps: number, env: NodeJS.ProcessEnv, n: string | undefined, bar: SingleBar): Promise<HarnessLine[]> {
  const lines: HarnessLine[] = [];
  for (const s of scenarios) {
    lines.push(...(await runHarnessScenario(dir, peer, s, reps, env, n)));
    bar.increment(1, { step: `${peer} ${s}` });
  }
  return lines;
}

/** A contestant of the alternation that runs one repetition through the peers' harness. */
function harnessContestant(dir: string, peer: string, label: string, scenarios: string[], env: NodeJS.ProcessEnv, n: string | undefined): Contestant {
  return {
    label,
    scenarios,
    async runOnce(s) {
      const [line] = await runHarnessScenario(dir, peer, s, 1, env, n);
      if (!line) throw new Error(`harness ${peer} ${s} printed no result`);
      if (line.skipped) return { skipped: line.skipped };
      if (line.error || !line.runs?.[0]) throw new Error(line.error ?? `harness ${peer} ${s} gave no run`);
      return { run: line.runs[0], n: line.n, settings: line.settings };
    },
  };
}

/** A contestant of the alternation that runs one repetition with Stepwise's own driver on a build. */
function ownContestant(spec: string, label: string, scenarios: string[], env: NodeJS.ProcessEnv, n: number | undefined): Contestant {
  let adapter: Adapter | undefined;
  return {
    label,
    scenarios,
    async runOnce(s) {
      adapter ??= await loadAdapter(spec, env);
      const size = n ?? defaultSize(s);
      return { run: await runRepetition({ env, spec }, adapter, s, size), n: scenarioSize(s, size), settings: adapter.settings };
    },
  };
}

/** The metrics of the tables, as the alternation's comparison takes them. */
function metrics(): Metric[] {
  return Object.entries(TARGETS).flatMap(([scenario, ms]) => ms.map((m) => ({ scenario, key: m.key, label: m.label, better: m.better })));
}

/** The commit the current build stands on, and whether the working tree differs from it. */
function currentRevision(): { head: string; dirty: boolean } {
  const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT, encoding: 'utf8' }).trim() !== '';
  return { head, dirty };
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
          return !line || line.skipped ? '-' : v == null ? 'n/a' : String(v);
        }),
        m.target,
      ]);
    }
  }
  const out = lines.length > 0 ? markdown(rows) : [];
  if (extras.length) {
    if (out.length > 0) out.push('');
    out.push('Stepwise extras:');
    for (const e of extras) out.push(`- ${e.label}: ${e.summary}`);
    for (const e of extras.filter((x) => x.table)) out.push('', `${e.label}:`, '', ...markdown(e.table as string[][]), ...(e.notes ?? []));
  }
  return out.join('\n');
}

async function main(): Promise<void> {
  const program = new Command('bench')
    .option('--reps <n>', 'repetitions per scenario (medians are reported)', '3')
    .option('--scenarios <list>', 'scenarios S1-S4 to run', 'S1,S2,S3,S4')
    .option(
      '--peers',
      "run S1-S4 through the peers' benchmark harness, for the peers (graphile-worker, pg-boss, DBOS, pg-workflows, and graphile-worker:batched in S2) and Stepwise alike; needs the harness (--peers-bench) and the npm registry",
      false,
    )
    .option('--peers-bench <dir>', "the peers' benchmark harness for --peers (default: STEPWISE_PEERS_BENCH, else ../shared/peers-bench beside the repository)")
    .option('--no-extras', 'skip Stepwise-only scenarios')
    .option(
      '--extras-only <list>',
      `run only these Stepwise-only scenarios (${EXTRA_NAMES.join(',')}, and the opt-in ${OPT_IN_EXTRAS.join(',')}, which runs only when named); with --scenarios= nothing else. ` +
        'flow: the claim cost of each flow-control feature against a plain task, S2-style, --reps interleaved repetitions of 6 variants (about 10 s per variant and repetition: 3 min at 3 reps); ' +
        'make bench ARGS="--scenarios= --extras-only flow"',
    )
    .option('--flow-variants <list>', `the variants of the flow extra (${FLOW_VARIANT_NAMES.join(',')}; default all; plain always runs, the ratios need it)`)
    .option('--n <n>', 'override the job count of S1-S3 and of the flow extra (quick runs)')
    .option('--list-rows <n>', 'rows for the list-with-total scenario', '1000000')
    .option('--long-polls <n>', 'concurrent long-polls, and concurrent streams, held by one API process', '10000')
    .option('--harness-results <dir>', 'reuse the harness results (*.jsonl) of an earlier run instead of running S1-S4')
    .option(
      '--baseline <rev>',
      'A/B: build REV (a commit, branch, HEAD~3) aside in .bench-baseline/<sha>/ and run S1-S4 on it and on the current build alternately, repetition by repetition (with --peers, the peers too); prints the ratios current/baseline',
    )
    .option('--seed <n>', 'with --baseline: the seed of the order in which the contestants take their turns in each repetition', '1')
    .parse(process.argv);
  const opts = program.opts<Options>();
  const knownExtras: readonly string[] = [...EXTRA_NAMES, ...OPT_IN_EXTRAS];
  const unknownExtras = (opts.extrasOnly?.split(',').filter(Boolean) ?? []).filter((x) => !knownExtras.includes(x));
  if (unknownExtras.length > 0) throw new Error(`--extras-only: no extra named ${unknownExtras.join(', ')} (there are ${knownExtras.join(', ')})`);
  const chosenFlowVariants = opts.flowVariants?.split(',').filter(Boolean);
  flowVariants(chosenFlowVariants); // fails now, not after S1-S4, on an unknown variant
  if (opts.baseline && opts.harnessResults) throw new Error('--baseline runs S1-S4 itself: it does not combine with --harness-results');
  const harnessSource = opts.peers ? findHarness(opts.peersBench) : undefined;
  process.stdout.write('building .bench-dist/ ...\n');
  const dist = buildForBench();
  const baseline: BaselineBuild | undefined = opts.baseline ? buildBaseline(opts.baseline, (l) => process.stdout.write(`${l}\n`)) : undefined;

  const env: NodeJS.ProcessEnv = { ...process.env, STEPWISE_ROOT: ROOT, STEPWISE_DIST: dist, PEERS_DIR: process.env.PEERS_DIR ?? path.join(os.tmpdir(), 'peers') };
  // The adapter, loaded in this process too by Stepwise's own driver, reads them from here.
  Object.assign(process.env, { STEPWISE_ROOT: ROOT, STEPWISE_DIST: dist });
  let embedded: Awaited<ReturnType<typeof startEmbeddedPostgres>> | undefined;
  let embeddedDir: string | undefined;
  const host = process.env.PGHOST ?? '127.0.0.1';
  const port = Number(process.env.PGPORT ?? 5432);
  if (!(await reachable(host, port))) {
    process.stdout.write('no PostgreSQL at PGHOST:PGPORT; starting an embedded one\n');
    embeddedDir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-bench-pg-'));
    embedded = await startEmbeddedPostgres({ dataDir: path.join(embeddedDir, 'pgdata'), database: 'postgres', onNotice: (m) => process.stdout.write(`${m}\n`) });
    Object.assign(env, { PGHOST: '127.0.0.1', PGPORT: String(embedded.port), PGUSER: 'postgres', PGPASSWORD: 'postgres' });
  }
  const scenarios = opts.harnessResults ? [] : opts.scenarios.split(',').filter(Boolean);
  const reps = Number(opts.reps);
  const n = opts.n;
  const peers = opts.peers ? ['stepwise', 'graphile-worker', 'pg-boss', 'dbos', 'pg-workflows'] : [];
  let harness: string | undefined;
  if (harnessSource) {
    harness = prepareHarness(harnessSource);
    env.PB_RESULTS = path.join(harness, 'results');
    execFileSync('bash', [path.join(harness, 'setup.sh')], { env, stdio: 'inherit' });
  }

  const lines: HarnessLine[] = [];
  const bar = new SingleBar({ format: 'bench [{bar}] {value}/{total} {step}', noTTYOutput: true, notTTYSchedule: 5000 }, Presets.shades_classic);
  // graphile-worker's batched-completion variant is the issue's S2 anchor: run it beside the defaults.
  const variantScenarios = opts.peers ? scenarios.filter((s) => s === 'S2') : [];
  // S4 once more with Stepwise scheduling as the peers' producers do (direct SQL through the SDK's
  // schedule(), no API server), so that each is compared with its like.
  const sqlScenarios = scenarios.filter((s) => s === 'S4');
  const extrasOnly = opts.extrasOnly?.split(',').filter(Boolean);
  const extraStepCount = opts.extras ? extraSteps({ only: extrasOnly, reps, flowVariants: chosenFlowVariants }) : 0;
  // --baseline: each contestant, a build of Stepwise or a peer, runs one repetition in each round.
  const contestants: Contestant[] = [];
  const pairs: Pair[] = [];
  if (baseline) {
    const baseEnv = { ...env, STEPWISE_ROOT: baseline.root, STEPWISE_DIST: baseline.dist };
    const at = `@${baseline.short}`;
    const nFlag = n ? Number(n) : undefined;
    for (const spec of ['stepwise', 'stepwise:sql']) {
      const mine = spec === 'stepwise' ? scenarios : sqlScenarios;
      if (mine.length === 0) continue;
      pairs.push({ name: spec, current: spec, baseline: `${spec}${at}` });
      for (const [label, e] of [
        [spec, env],
        [`${spec}${at}`, baseEnv],
      ] as const) {
        contestants.push(harness ? harnessContestant(harness, spec, label, mine, e, n) : ownContestant(spec, label, mine, e, nFlag));
      }
    }
    if (harness) {
      for (const peer of peers.filter((p) => p !== 'stepwise')) contestants.push(harnessContestant(harness, peer, peer, scenarios, env, n));
      if (variantScenarios.length > 0) contestants.push(harnessContestant(harness, 'graphile-worker:batched', 'graphile-worker:batched', variantScenarios, env, n));
    }
  }
  const abSteps = reps * contestants.reduce((sum, c) => sum + c.scenarios.length, 0);
  const steps = baseline
    ? abSteps + extraStepCount
    : (opts.peers ? peers.length * scenarios.length + variantScenarios.length : scenarios.length) + sqlScenarios.length + extraStepCount;
  let order: Awaited<ReturnType<typeof runAlternating>>['order'] = [];
  bar.start(steps, 0, { step: 'starting' });
  let extras: ExtraResult[] = [];
  if (opts.harnessResults) {
    for (const f of readdirSync(opts.harnessResults).filter((x) => x.endsWith('.jsonl'))) {
      for (const line of readFileSync(path.join(opts.harnessResults, f), 'utf8').trim().split('\n')) if (line) lines.push(JSON.parse(line) as HarnessLine);
    }
  }
  const progress = (step: string) => bar.increment(1, { step });
  try {
    if (baseline) {
      const alternation = await runAlternating({ contestants, scenarios, reps, seed: Number(opts.seed), progress });
      lines.push(...alternation.lines);
      order = alternation.order;
    } else if (harness) {
      for (const peer of peers) lines.push(...(await runHarness(harness, peer, scenarios, reps, env, n, bar)));
      if (sqlScenarios.length > 0) lines.push(...(await runHarness(harness, 'stepwise:sql', sqlScenarios, reps, env, n, bar)));
      if (variantScenarios.length > 0) lines.push(...(await runHarness(harness, 'graphile-worker:batched', variantScenarios, reps, env, n, bar)));
    } else if (scenarios.length > 0) {
      const common = { env, reps, n: n ? Number(n) : undefined, progress };
      lines.push(...(await runScenarios({ ...common, spec: 'stepwise', scenarios })));
      if (sqlScenarios.length > 0) lines.push(...(await runScenarios({ ...common, spec: 'stepwise:sql', scenarios: sqlScenarios })));
    }
    if (opts.extras) {
      extras = await runExtras({
        env,
        listRows: Number(opts.listRows),
        longPolls: Number(opts.longPolls),
        progress,
        only: extrasOnly,
        reps,
        n: n ? Number(n) : undefined,
        flowVariants: chosenFlowVariants,
      });
    }
  } finally {
    bar.stop();
    await embedded?.stop();
    if (embedded) rmSync(embedded.dataDir, { recursive: true, force: true });
    if (embeddedDir) rmSync(embeddedDir, { recursive: true, force: true });
    if (harness) rmSync(harness, { recursive: true, force: true });
  }
  const comparisons = baseline ? compare(lines, pairs, metrics()) : [];
  const result = {
    at: new Date().toISOString(),
    host: { cpus: os.cpus().length, node: process.version, postgres: embedded ? 'embedded' : `${host}:${port}` },
    driver: (harness ? 'peers-bench harness' : 'scripts/bench/scenarios.ts') + (baseline ? ', alternating (scripts/bench/alternate.ts)' : ''),
    reps,
    current: currentRevision(),
    ...(baseline ? { baseline: { rev: baseline.rev, sha: baseline.sha }, seed: Number(opts.seed), order, comparisons } : {}),
    harness: lines,
    extras,
  };
  mkdirSync(path.join(ROOT, 'bench-results'), { recursive: true });
  const file = path.join(ROOT, 'bench-results', `bench-${result.at.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(result, null, 2));
  for (const l of lines) if (l.error || !l.median) process.stdout.write(`note: ${JSON.stringify(l).slice(0, 400)}\n`);
  process.stdout.write(`\n${table(lines, extras)}\n`);
  if (baseline) {
    const cur = `${result.current.head.slice(0, 7)}${result.current.dirty ? ' with uncommitted changes' : ''}`;
    const sizes = n ? `, S1-S3 with ${n} executions (--n)` : '';
    process.stdout.write(`\nA/B: current (${cur}) / baseline ${baseline.short} (${baseline.rev}), ${reps} alternating repetitions${sizes}, seed ${opts.seed}:\n\n`);
    process.stdout.write(`${comparisonTable(comparisons, metrics(), `baseline ${baseline.short}`).join('\n')}\n`);
  }
  process.stdout.write(`\nresults: ${path.relative(process.cwd(), file)}\n`);
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${(err as Error).message.includes('\n') ? (err as Error).message : (err as Error).stack}\n`);
  process.exit(1);
});
