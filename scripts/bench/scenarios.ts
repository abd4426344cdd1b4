// Stepwise's own driver for the benchmark scenarios S1-S4: what `make bench` runs on any clone. It
// follows the method of the peers' harness (../shared/peers-bench, used with `--peers`) so that the
// figures compare: the same adapter (stepwise-adapter.mjs), each role in a process of its own
// (scenario-child.mjs), a fresh database per repetition, CHECKPOINT before each measured phase, the
// same sizes and the same clocks, medians over the repetitions.
//
// S1  schedule n (10,000) no-op executions, one call each, 32 in flight, after 100 warm-up calls
// S2  n (10,000) no-op executions scheduled first, then VACUUM ANALYZE; CHECKPOINT; a worker with
//     concurrency 32 starts: completed per second, from just before the worker's start call to the
//     last completed_at
// S3  as S2 with n (2,000) executions of three memoized steps each
// S4  an idle worker; one schedule every 20 ms for 10 s after 25 warm-up ones: handler start minus
//     the moment just before the schedule call, p50/p95/p99
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';

export interface ScenarioLine {
  peer: string;
  scenario: string;
  n?: number | string;
  reps?: number;
  median?: Record<string, number | null>;
  runs?: Record<string, number | string | null>[];
  settings?: unknown;
  skipped?: string;
  error?: string;
}

export interface ScenarioOptions {
  /** PGHOST, PGPORT, PGUSER, PGPASSWORD of the server to run on; STEPWISE_ROOT and STEPWISE_DIST for the adapter. */
  env: NodeJS.ProcessEnv;
  /** Adapter specs: `stepwise` (schedules over HTTP), `stepwise:sql` (the SDK's schedule()). */
  spec: string;
  scenarios: string[];
  reps: number;
  n?: number;
  progress: (step: string) => void;
}

const SIZES: Record<string, number> = { S1: 10000, S2: 10000, S3: 2000 };
const CHILD = path.join(__dirname, 'scenario-child.mjs');

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function percentile(values: number[], p: number): number | null {
  if (!values.length) return null;
  const s = [...values].sort((a, b) => a - b);
  const idx = (p / 100) * (s.length - 1);
  const lo = Math.floor(idx);
  const hi = Math.ceil(idx);
  return s[lo] + (s[hi] - s[lo]) * (idx - lo);
}
const round = (x: number | null, d = 1) => (x == null ? null : Math.round(x * 10 ** d) / 10 ** d);

type Message = { type: string; [key: string]: unknown };

/** A role in a process of its own, talking over IPC. */
class Child {
  private readonly queue: Message[] = [];
  private readonly waiters: { type: string; resolve: (m: Message) => void; reject: (e: Error) => void }[] = [];
  private exited: { code: number | null } | undefined;
  readonly proc: ChildProcess;

  constructor(spec: string, role: string, url: string, opts: object, env: NodeJS.ProcessEnv) {
    this.proc = fork(CHILD, [spec, role, url, JSON.stringify(opts)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env, execArgv: ['--no-deprecation'] });
    this.proc.on('message', (m: Message) => {
      this.queue.push(m);
      this.pump();
    });
    this.proc.on('exit', (code) => {
      this.exited = { code };
      this.pump();
    });
  }

  private pump(): void {
    for (const w of [...this.waiters]) {
      const i = this.queue.findIndex((m) => m.type === w.type || m.type === 'error');
      if (i >= 0) {
        const [m] = this.queue.splice(i, 1);
        this.waiters.splice(this.waiters.indexOf(w), 1);
        if (m.type === 'error') w.reject(new Error(`child error: ${String(m.message)}`));
        else w.resolve(m);
      } else if (this.exited) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.reject(new Error(`child exited (${this.exited.code}) before sending "${w.type}"`));
      }
    }
  }

  waitFor(type: string, timeoutMs = 600000): Promise<Message> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for "${type}"`)), timeoutMs);
      this.waiters.push({
        type,
        resolve: (m) => (clearTimeout(timer), resolve(m)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      this.pump();
    });
  }

  send(m: Message): void {
    if (!this.exited) this.proc.send(m);
  }

  async exit(timeoutMs = 20000): Promise<void> {
    const deadline = now() + timeoutMs;
    while (!this.exited && now() < deadline) await sleep(20);
    if (!this.exited) {
      this.proc.kill('SIGKILL');
      while (!this.exited) await sleep(20);
    }
  }
}

async function runChild(spec: string, role: string, url: string, opts: object, env: NodeJS.ProcessEnv, timeoutMs = 600000): Promise<Message> {
  const c = new Child(spec, role, url, opts, env);
  try {
    const m = await c.waitFor('done', timeoutMs);
    await c.exit();
    return m;
  } catch (err) {
    c.proc.kill('SIGKILL');
    await c.exit();
    throw err;
  }
}

function serverUrl(env: NodeJS.ProcessEnv, database: string): string {
  const user = encodeURIComponent(env.PGUSER ?? 'postgres');
  const pass = encodeURIComponent(env.PGPASSWORD ?? 'postgres');
  return `postgres://${user}:${pass}@${env.PGHOST ?? '127.0.0.1'}:${env.PGPORT ?? 5432}/${database}`;
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

// The adapter's database queries (remaining, succeeded, ...), loaded in this process too.
export interface Adapter {
  name: string;
  version: string;
  settings: unknown;
  remaining(c: pg.Client): Promise<number>;
  succeeded(c: pg.Client, n: number): Promise<number>;
  lastCompletion(c: pg.Client, createdAfter?: number): Promise<number | null>;
}

/**
 * The adapter on the build that STEPWISE_ROOT and STEPWISE_DIST name, in `env` when given (one module
 * instance per build, as the adapter reads them when loaded), else in this process's environment.
 */
export async function loadAdapter(spec: string, env: NodeJS.ProcessEnv = process.env): Promise<Adapter> {
  const url = new URL(pathToFileURL(path.join(__dirname, 'stepwise-adapter.mjs')).href);
  url.searchParams.set('dist', env.STEPWISE_DIST ?? '');
  const keys = ['STEPWISE_ROOT', 'STEPWISE_DIST'] as const;
  const saved = keys.map((k) => process.env[k]);
  // process.env turns undefined into "undefined": an unset key is deleted instead.
  const put = (values: (string | undefined)[]) => keys.forEach((k, i) => (values[i] === undefined ? delete process.env[k] : (process.env[k] = values[i])));
  put(keys.map((k) => env[k]));
  try {
    const mod = (await import(url.href)) as { make(variant?: string): Adapter };
    return mod.make(spec.split(':')[1]);
  } finally {
    put(saved);
  }
}

/**
 * A fresh database with the adapter's setup applied (`setup`: the setup role's options); CHECKPOINT,
 * so each measured phase starts clean.
 */
async function freshSetup(o: Pick<ScenarioOptions, 'env' | 'spec'>, setup: object = {}): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `sw_bench_${randomBytes(4).toString('hex')}`;
  const admin = serverUrl(o.env, 'postgres');
  await withClient(admin, (c) => c.query(`CREATE DATABASE ${name}`));
  const url = serverUrl(o.env, name);
  await runChild(o.spec, 'setup', url, setup, o.env, 120000);
  await withClient(admin, (c) => c.query('CHECKPOINT'));
  return { url, drop: () => withClient(admin, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined) };
}

/**
 * A database that already holds executions (the list extra's millions), to run S2 or S4 on instead of
 * a fresh one: the adapter's counts of active and completed rows are taken relative to what it held.
 */
export interface ExistingDatabase {
  url: string;
  activeBefore: number;
  completedBefore: number;
}

/** The adapter's setup on an existing database (it migrates, which is a no-op, and registers tasks); CHECKPOINT. Never dropped. */
async function existingSetup(o: Pick<ScenarioOptions, 'env' | 'spec'>, on: ExistingDatabase): Promise<{ url: string; drop(): Promise<void> }> {
  await runChild(o.spec, 'setup', on.url, {}, o.env, 120000);
  await withClient(serverUrl(o.env, 'postgres'), (c) => c.query('CHECKPOINT'));
  return { url: on.url, drop: async () => undefined };
}

async function s1(o: Pick<ScenarioOptions, 'env' | 'spec'>, adapter: Adapter, n: number): Promise<Record<string, number>> {
  const { url, drop } = await freshSetup(o);
  try {
    const m = await runChild(o.spec, 'enqueue', url, { n, conc: 32, warmup: 100 }, o.env);
    const have = await withClient(url, (c) => adapter.remaining(c));
    if (have < n) throw new Error(`S1: expected >= ${n} executions, found ${have}`);
    const elapsed = m.elapsed_ms as number;
    return { single_jobs_s: (n / elapsed) * 1000, single_elapsed_ms: elapsed, single_producer_cpu_cores: m.cpu_cores as number };
  } finally {
    await drop();
  }
}

/**
 * S2 and S3: n executions of `kind` scheduled, VACUUM ANALYZE, CHECKPOINT, then one worker (concurrency
 * 32) drains them. `kind` may also be a flow variant of the adapter's (scripts/bench/flow.ts), and
 * `countClaims` has the worker count its claims and round trips (the result's `claims_*`).
 */
export async function drain(
  o: Pick<ScenarioOptions, 'env' | 'spec'>,
  adapter: Adapter,
  n: number,
  kind: string,
  countClaims = false,
  on?: ExistingDatabase,
): Promise<Record<string, number | string | null>> {
  const { url, drop } = on ? await existingSetup(o, on) : await freshSetup(o, kind === 'noop' || kind === 'steps3' ? {} : { kind });
  const activeBefore = on?.activeBefore ?? 0;
  const c = new pg.Client({ connectionString: url });
  let w: Child | undefined;
  try {
    const enqueuedFrom = Date.now() - 60_000; // allows for the database's clock running behind
    await runChild(o.spec, 'enqueue', url, { n, conc: 32, kind }, o.env);
    await c.connect();
    await c.query('VACUUM ANALYZE');
    await c.query('CHECKPOINT');
    const remaining = async (client: pg.Client) => (await adapter.remaining(client)) - activeBefore;
    const before = await remaining(c);
    if (before !== n) throw new Error(`expected ${n} queued, found ${before}`);
    w = new Child(o.spec, 'worker', url, { concurrency: 32, kind, ...(countClaims ? { count: true } : {}) }, o.env);
    let ready: Message | undefined;
    w.waitFor('ready', 120000).then(
      (m) => (ready = m),
      () => undefined,
    );
    let tObs: number | undefined;
    const deadline = now() + 300000;
    let prev: { r: number; t: number } | undefined;
    let rate = 0;
    while (now() < deadline) {
      const r = await remaining(c);
      if (r === 0) {
        tObs = now();
        break;
      }
      // Poll rarely while far from done and often near the end (the count is not free).
      const t = now();
      if (prev && prev.r > r) rate = ((prev.r - r) / (t - prev.t)) * 1000;
      prev = { r, t };
      await sleep(Math.max(5, Math.min(100, (rate > 0 ? (r / rate) * 1000 : Infinity) / 4)));
    }
    if (tObs === undefined) throw new Error('not drained within 300 s');
    while (!ready) await sleep(5);
    const tCall = ready.tCall as number;
    w.send({ type: 'stats' });
    const st = await w.waitFor('stats', 30000);
    const ok = (await adapter.succeeded(c, n)) - (on?.completedBefore ?? 0);
    const lastDb = await adapter.lastCompletion(c, on ? enqueuedFrom : undefined);
    const tEnd = lastDb != null && lastDb <= tObs && lastDb > tCall ? lastDb : tObs;
    const elapsed = tEnd - tCall;
    const firstStart = st.firstStart as number | null;
    return {
      completed_s: (n / elapsed) * 1000,
      elapsed_ms: elapsed,
      end_source: tEnd === tObs ? 'observed' : 'db',
      startup_ms: (ready.tReady as number) - tCall,
      first_start_ms: firstStart ? firstStart - tCall : null,
      drain_only_completed_s: firstStart ? (n / (tEnd - firstStart)) * 1000 : null,
      succeeded: ok,
      handler_starts: st.starts as number,
      worker_cpu_cores: (st.cpu_ms as number) / elapsed,
      ...Object.fromEntries(Object.entries((st.counts ?? {}) as Record<string, number>).map(([k, v]) => [`claims_${k}`, v])),
    };
  } finally {
    if (w) {
      w.send({ type: 'stop' });
      await w.exit();
    }
    await c.end().catch(() => undefined);
    await drop();
  }
}

export async function s4(o: Pick<ScenarioOptions, 'env' | 'spec'>, on?: ExistingDatabase): Promise<Record<string, number | null>> {
  const { url, drop } = on ? await existingSetup(o, on) : await freshSetup(o);
  const w = new Child(o.spec, 'worker', url, { concurrency: 32, kind: 'noop', wantLat: true }, o.env);
  try {
    await w.waitFor('ready', 120000);
    await sleep(1000); // let the worker settle into its idle wait
    const p = await runChild(o.spec, 'producer', url, { intervalMs: 20, durationMs: 10000, pollMs: 2, warmupJobs: 25 }, o.env, 180000);
    w.send({ type: 'stats' });
    const st = await w.waitFor('stats', 30000);
    const lat = st.lat as number[];
    const e2e = p.e2e as number[];
    return {
      n: p.n as number,
      start_p50_ms: round(percentile(lat, 50)),
      start_p95_ms: round(percentile(lat, 95)),
      start_p99_ms: round(percentile(lat, 99)),
      done_p50_ms: round(percentile(e2e, 50)),
      done_p99_ms: round(percentile(e2e, 99)),
      enqueue_call_p50_ms: round(percentile(p.enqCall as number[], 50)),
      started: lat.length,
      errors: p.errors as number,
      timed_out: p.timedOut as number,
    };
  } finally {
    w.send({ type: 'stop' });
    await w.exit();
    await drop();
  }
}

export function medians(runs: Record<string, unknown>[]): Record<string, number | null> {
  const keys = new Set(runs.flatMap((r) => Object.keys(r).filter((k) => typeof r[k] === 'number')));
  const out: Record<string, number | null> = {};
  for (const k of keys) {
    const v = percentile(
      runs.map((r) => r[k]).filter((x): x is number => typeof x === 'number' && Number.isFinite(x)),
      50,
    );
    out[k] = v == null ? null : Math.abs(v) >= 100 ? round(v, 0) : round(v, 2);
  }
  return out;
}

/** One repetition of scenario `s` (S1-S4) with `n` executions, on a fresh database of its own. */
export async function runRepetition(o: Pick<ScenarioOptions, 'env' | 'spec'>, adapter: Adapter, s: string, n: number): Promise<Record<string, number | string | null>> {
  if (s === 'S1') return s1(o, adapter, n);
  if (s === 'S2') return drain(o, adapter, n, 'noop');
  if (s === 'S3') return drain(o, adapter, n, 'steps3');
  if (s === 'S4') return s4(o);
  throw new Error(`unknown scenario ${s} (known: S1, S2, S3, S4)`);
}

/** The size a scenario reports: its job count, or S4's schedule rhythm. */
export function scenarioSize(s: string, n: number): number | string {
  return s === 'S4' ? '20ms x 10s' : n;
}

/** The default job count of S1-S3 (S4 runs by time). */
export function defaultSize(s: string): number {
  return SIZES[s] ?? 0;
}

/** Runs the scenarios for one adapter spec; a scenario that fails gives a line with `error`. */
export async function runScenarios(o: ScenarioOptions): Promise<ScenarioLine[]> {
  const adapter = await loadAdapter(o.spec);
  const lines: ScenarioLine[] = [];
  for (const s of o.scenarios) {
    const n = o.n ?? SIZES[s];
    try {
      const runs: Record<string, number | string | null>[] = [];
      for (let rep = 1; rep <= o.reps; rep++) runs.push(await runRepetition(o, adapter, s, n));
      lines.push({ peer: adapter.name, scenario: s, n: scenarioSize(s, n), reps: o.reps, median: medians(runs), runs, settings: adapter.settings });
    } catch (err) {
      lines.push({ peer: adapter.name, scenario: s, error: (err as Error).message });
    }
    o.progress(`${adapter.name} ${s}`);
  }
  return lines;
}
