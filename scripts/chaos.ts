// `make chaos`: a fault-injection run against real processes. One `stepwise serve`, two `stepwise worker`
// processes (short leases) and PostgreSQL (embedded unless DATABASE_URL is set). A driver schedules a mix
// of executions over HTTP (steps, sleeps, event waits with deliveries, retries, cancels, failures, and
// parallel steps, sleeps and event waits, step timeouts and per-step retries, and an operator's retries
// of failed and cancelled executions, one at a time, several at once or racing a cancel, bulk retries
// by tag, two tasks paused for a few seconds each, bursts of a task limited to two running at once
// per tenant and of one limited to five starts a second per tenant, and races: an event wait against
// a timer, delivered early or never, two timers, and a reminder loop, each round an approval wait
// against a grace sleep, whose approval the driver delivers in a planned round) while
// a random worker is SIGKILLed about every 2 s and restarted, PostgreSQL is restarted twice (once a fast
// shutdown, once an immediate one with crash recovery), the API server is SIGKILLed once while
// long-polls are open, and the database goes silent once for longer than the processes' query timeout
// (the processes reach PostgreSQL through a TCP proxy here, which keeps accepting connections and
// forwards nothing: a hung database or pooler). A webhook subscribed to every execution event at the start sends to a receiver in
// this process, which verifies each signature and answers some requests 500 or too late. Then it checks
// every execution against the outcome its data implies, the workers' side-effect logs against the
// recorded steps, the webhook notifications against the executions (scripts/chaos/webhooks.ts), the
// flow-control limits against the handler runs and the attempts' starts (scripts/chaos/verify-flow.ts),
// and the races' winners, closed losers and approvals against their histories (scripts/chaos/verify-races.ts);
// it prints a report, writes it to chaos-results/ and exits 1 on any violation.
//
//   make chaos                       5,000 executions (< 5 min)
//   make chaos ARGS=--short          600 executions (about 1 min; CI)
//   make chaos ARGS=--long           20,000 executions
//   ARGS="--executions 2000 --seed 7 --keep"
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { createDb } from '../src/store/db';
import { findFreePort } from '../src/store/embedded';
import { migrateLatest } from '../src/store/migrate';
import { ChaosDriver, latencyByKind } from './chaos/driver';
import pg from 'pg';
import { KEYED_LIMIT, KEYED_TASK, LIMIT, LIMITED_TASK, planExecutions, RATE_LIMIT, RATE_PERIOD_MS, RATED_TASK } from './chaos/outcomes';
import { apiProcess, createDatabase, dropDatabase, externalServer, ROOT, startEmbeddedServer, workerProcess, type DatabaseServer, type StepwiseProcess } from './chaos/processes';
import { compileForRun } from './chaos/build';
import type { OperatorStats } from './chaos/operate';
import { verifyRun } from './chaos/verify';
import { verifyFlow, type FlowCounts } from './chaos/verify-flow';
import type { OperateCounts } from './chaos/verify-operate';
import type { RaceCounts } from './chaos/verify-races';
import { ChaosWebhookReceiver, drainDeliveries, verifyWebhooks, WEBHOOK_ENV, type WebhookVerification } from './chaos/webhooks';
import { createTcpProxy } from '../test/helpers/tcp-proxy';

interface Options {
  short?: boolean;
  long?: boolean;
  executions?: string;
  flows?: string;
  seed?: string;
  killEveryMs: string;
  leaseMs: string;
  concurrency: string;
  deadlineMinutes?: string;
  keep?: boolean;
  fromSource?: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TOKEN = 'chaos-token';
/**
 * The tasks an operator pauses, when (progress) and for how long. They start away from the database
 * restarts (30 %, 65 %) and the API server's SIGKILL (45 %); a pause that spans one all the same is
 * resumed once the server is back (the resume is retried until it lands).
 */
const PAUSES = [
  { at: 0.08, task: 'chaos.slow', ms: 3000 },
  { at: 0.5, task: 'chaos.retry', ms: 3000 },
] as const;
/**
 * The processes' database timeouts, short so that the silence below outlasts them; and the silence:
 * when (progress) and for how long.
 */
const DB_TIMEOUT_ENV = {
  STEPWISE_DB_CONNECT_TIMEOUT_MS: '3000',
  STEPWISE_DB_STATEMENT_TIMEOUT_MS: '5000',
  STEPWISE_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '5000',
  STEPWISE_DB_QUERY_TIMEOUT_MS: '7000',
};
const SILENCE = { at: 0.75, ms: 10000 };
/** Stops what the run started, also when it fails half-way: no process is left behind. */
let cleanup: () => Promise<void> = async () => undefined;

interface FaultLog {
  /** `pid`: the process killed; `atMs`: once it had exited. */
  workerKills: Array<{ atMs: number; worker: string; pid: number | undefined }>;
  workerRestartFailures: number;
  databaseRestarts: Array<{ atMs: number; crash: boolean; downMs: number; tookMs: number; progress: number }>;
  apiKills: Array<{ atMs: number; openLongPolls: number; backAfterMs: number; progress: number }>;
  databaseSilences: Array<{ atMs: number; silentMs: number; progress: number }>;
}

async function main(): Promise<void> {
  const opts = new Command('chaos')
    .option('--short', 'CI size: 600 executions, about a minute')
    .option('--long', '20,000 executions')
    .option('--executions <n>', 'executions to run (overrides the size)')
    .option('--flows <n>', 'client flows in flight at once')
    .option('--seed <n>', 'seed of the plan (default: time)')
    .option('--kill-every-ms <ms>', 'mean interval between worker SIGKILLs', '2000')
    .option('--lease-ms <ms>', 'worker lease', '2000')
    .option('--concurrency <n>', 'handler slots per worker', '32')
    .option('--deadline-minutes <n>', 'give up on the run after this long')
    .option('--keep', 'keep the temporary folder (logs, side effects, database)')
    .option('--from-source', 'run bin/stepwise.js through tsx instead of a compiled copy (slow restarts)')
    .parse()
    .opts<Options>();
  const executions = Number(opts.executions ?? (opts.short ? 600 : opts.long ? 20000 : 5000));
  const flows = Number(opts.flows ?? (opts.short ? 150 : 400));
  const seed = Number(opts.seed ?? Date.now() % 1_000_000);
  const deadlineMs = Number(opts.deadlineMinutes ?? (opts.long ? 30 : opts.short ? 4 : 8)) * 60000;
  const runId = `chaos-${Date.now().toString(36)}`;
  const started = Date.now();
  const since = () => Date.now() - started;
  const say = (msg: string) => process.stdout.write(`[chaos ${(since() / 1000).toFixed(1).padStart(6)} s] ${msg}\n`);

  const dir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-chaos-'));
  chmodSync(dir, 0o755);
  const effectsDir = path.join(dir, 'effects');
  const logDir = path.join(dir, 'logs');
  mkdirSync(effectsDir, { recursive: true });
  say(`run ${runId}: ${executions} executions, ${flows} flows, seed ${seed}, folder ${dir}`);

  const server: DatabaseServer = process.env.DATABASE_URL ? externalServer(process.env.DATABASE_URL) : await startEmbeddedServer(path.join(dir, 'pg'));
  const canRestartDb = server.embedded || Boolean(process.env.CHAOS_PG_RESTART);
  const dbName = `stepwise_${runId.replace(/-/g, '_')}`;
  const url = await createDatabase(server.adminUrl, dbName);
  const migrationDb = createDb({ url, poolMax: 1 });
  await migrateLatest(migrationDb);
  await migrationDb.destroy();
  // The processes go through a proxy that can go silent; the driver's checks reach PostgreSQL directly.
  const target = new URL(url);
  const proxy = await createTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
  await proxy.start();

  const port = await findFreePort();
  const env = {
    DATABASE_URL: proxy.urlThrough(url),
    ...DB_TIMEOUT_ENV,
    STEPWISE_API_TOKENS: TOKEN,
    STEPWISE_LEASE_MS: opts.leaseMs,
    STEPWISE_POLL_INTERVAL_MS: '250',
    STEPWISE_SHUTDOWN_GRACE_MS: '2000',
    STEPWISE_DB_POOL_MAX: '8',
    CHAOS_EFFECTS_DIR: effectsDir,
    ...WEBHOOK_ENV,
  };
  const sourceTasks = path.join(ROOT, 'scripts', 'chaos', 'tasks.ts');
  const compiled = opts.fromSource ? undefined : compileForRun(`chaos-build-${runId}`, [sourceTasks]);
  const tasksFile = compiled?.tasks[sourceTasks] ?? sourceTasks;
  const api = apiProcess(port, env, logDir, compiled?.bin);
  const workers = [1, 2].map((i) => workerProcess(`worker-${i}`, tasksFile, env, logDir, Number(opts.concurrency), compiled?.bin));
  const all: StepwiseProcess[] = [api, ...workers];
  const shutdown = async () => {
    for (const p of all) await p.kill().catch(() => undefined);
    await proxy.stop().catch(() => undefined);
    await server.stop().catch(() => undefined);
    compiled?.remove();
  };
  cleanup = shutdown;
  process.once('SIGINT', () => void shutdown().then(() => process.exit(130)));

  const workersFrom = Date.now();
  await Promise.all([api.start(), ...workers.map((w) => w.start())]);
  say(`api on port ${port} and 2 workers ready (${workers.map((w) => `${w.startupMs[0]} ms`).join(', ')} to start)`);
  // A webhook on all four events, to a receiver in this process: checked at the end like the executions.
  const webhooks = new ChaosWebhookReceiver();
  await webhooks.start();
  await webhooks.subscribe(`http://127.0.0.1:${port}`, TOKEN);
  const stopWebhooks = shutdown;
  cleanup = async () => {
    await stopWebhooks();
    await webhooks.close().catch(() => undefined);
  };
  say(`webhook ${webhooks.webhookId} subscribed to all execution events`);

  const faults: FaultLog = { workerKills: [], workerRestartFailures: 0, databaseRestarts: [], apiKills: [], databaseSilences: [] };
  const plans = planExecutions(executions, seed, runId);
  const driver = new ChaosDriver(`http://127.0.0.1:${port}`, TOKEN, started + deadlineMs);
  let driving = true;
  let stopDriving!: () => void;
  const drivingStopped = new Promise<void>((resolve) => (stopDriving = resolve));
  /** Sleeps, but wakes as soon as the driving ends. */
  const pause = (ms: number) => Promise.race([sleep(ms), drivingStopped]);
  const progress = () => driver.stats.finished / executions;

  // A random ready worker is SIGKILLed about every killEveryMs and started again at once.
  const restarts = new Set<Promise<void>>();
  const killer = (async () => {
    const every = Number(opts.killEveryMs);
    while (driving) {
      await pause(every * (0.75 + Math.random() / 2));
      if (!driving) break;
      const ready = workers.filter((w) => w.ready);
      if (ready.length === 0) continue;
      const victim = ready[Math.floor(Math.random() * ready.length)];
      const pid = victim.pid;
      await victim.kill();
      faults.workerKills.push({ atMs: since(), worker: victim.name, pid });
      const restart = victim.start(120000).catch(() => void (faults.workerRestartFailures += 1));
      restarts.add(restart);
      void restart.finally(() => restarts.delete(restart));
    }
  })();

  // Progress-triggered faults: the database at 30 % and 65 %, the API server at 45 % with long-polls
  // open, and the database silent at 75 %.
  const faultsDone = (async () => {
    const dbAt = canRestartDb ? [0.3, 0.65] : [];
    let apiKilled = false;
    let silenced = false;
    while (driving && (dbAt.length > 0 || !apiKilled || !silenced)) {
      await pause(100);
      if (dbAt.length > 0 && progress() >= dbAt[0]) {
        const crash = dbAt.length === 1;
        const downMs = 3000;
        const at = since();
        say(`restarting PostgreSQL (${crash ? 'immediate shutdown' : 'fast shutdown'}, ${downMs / 1000} s down) at ${(progress() * 100).toFixed(0)} %`);
        const p = progress();
        await server.restart(downMs, crash);
        faults.databaseRestarts.push({ atMs: at, crash, downMs, tookMs: since() - at, progress: p });
        dbAt.shift();
      }
      if (!apiKilled && progress() >= 0.45 && (driver.stats.openLongPolls >= 5 || progress() >= 0.6)) {
        apiKilled = true;
        const at = since();
        const open = driver.stats.openLongPolls;
        say(`SIGKILL the API server with ${open} long-polls open`);
        await api.kill();
        await sleep(1000);
        await api.start(120000);
        faults.apiKills.push({ atMs: at, openLongPolls: open, backAfterMs: since() - at, progress: progress() });
        say(`API server back after ${since() - at} ms`);
      }
      if (!silenced && progress() >= SILENCE.at) {
        silenced = true;
        const at = since();
        const p = progress();
        say(`the database goes silent for ${SILENCE.ms / 1000} s at ${(p * 100).toFixed(0)} % (connections accepted, nothing forwarded)`);
        proxy.silence();
        await sleep(SILENCE.ms);
        proxy.forward();
        faults.databaseSilences.push({ atMs: at, silentMs: since() - at, progress: p });
        say('the database answers again');
      }
    }
  })();

  // An operator pauses a task for a few seconds, twice: its executions wait, none starts meanwhile.
  const paused = (async () => {
    const plan = [...PAUSES];
    while (driving && plan.length > 0) {
      await pause(100);
      if (!driving || progress() < plan[0].at) continue;
      const { task, ms } = plan.shift()!;
      say(`pausing ${task} for ${ms / 1000} s at ${(progress() * 100).toFixed(0)} %`);
      const window = await driver.operator.pauseFor(task, ms);
      say(`resumed ${task} (${window.pendingAtResume} of its executions pending)`);
    }
  })();

  // The limited task's live leases, sampled every 25 ms while driving: never above its limit; and the
  // keyed task's, per tenant, never above its limit per tenant.
  const limitSamples = { max: 0, samples: 0, overLimit: [] as Array<{ atMs: number; running: number }> };
  const keyedSamples = { max: 0, samples: 0, overLimit: [] as Array<{ atMs: number; tenant: string; running: number }> };
  const sampler = (async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    pool.on('error', () => undefined);
    while (driving) {
      try {
        const { rows } = await pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM stepwise.executions WHERE task = $1 AND status = 'running' AND due_at > now()",
          [LIMITED_TASK],
        );
        limitSamples.samples += 1;
        limitSamples.max = Math.max(limitSamples.max, rows[0].n);
        if (rows[0].n > LIMIT) limitSamples.overLimit.push({ atMs: since(), running: rows[0].n });
        const keyed = await pool.query<{ key: string; n: number }>(
          "SELECT concurrency_key AS key, count(*)::int AS n FROM stepwise.executions WHERE task = $1 AND status = 'running' AND due_at > now() GROUP BY 1",
          [KEYED_TASK],
        );
        keyedSamples.samples += 1;
        for (const k of keyed.rows) {
          keyedSamples.max = Math.max(keyedSamples.max, k.n);
          if (k.n > KEYED_LIMIT) keyedSamples.overLimit.push({ atMs: since(), tenant: k.key, running: k.n });
        }
      } catch {
        // The database is restarting: sample again once it is back.
      }
      await pause(25);
    }
    await pool.end().catch(() => undefined);
  })();

  const ticker = setInterval(() => {
    const s = driver.stats;
    say(`${s.finished}/${executions} finished, ${s.openLongPolls} long-polls open, ${faults.workerKills.length} worker kills, ${s.retries} client retries, ${driver.operator.stats.retries.sent} operator retries`);
  }, 10000);
  const driveStarted = Date.now();
  const driven = await driver.run(plans, flows);
  const driveMs = Date.now() - driveStarted;
  driving = false;
  stopDriving();
  clearInterval(ticker);
  await killer;
  await faultsDone;
  await paused;
  await sampler;
  await Promise.all([...restarts]);
  say(`driving done in ${(driveMs / 1000).toFixed(1)} s; waiting for webhook deliveries`);
  const drained = await drainDeliveries(url, 120000, say);
  say(`webhook deliveries ${drained.pending === 0 ? 'all made' : `${drained.pending} still pending`} after ${(drained.waitedMs / 1000).toFixed(1)} s; stopping processes`);
  await Promise.all(workers.map((w) => w.stop()));
  const workersTo = Date.now();
  await api.stop();
  for (const p of all) p.close();
  await proxy.stop();
  compiled?.remove();

  const verifyStarted = Date.now();
  // Faults that can cost an execution its attempt: worker SIGKILLs, and PostgreSQL while it restarted or was silent.
  const faultWindows = [
    ...faults.workerKills.map((k) => ({ from: started + k.atMs, to: started + k.atMs })),
    ...faults.databaseRestarts.map((r) => ({ from: started + r.atMs, to: started + r.atMs + r.tookMs })),
    ...faults.databaseSilences.map((r) => ({ from: started + r.atMs, to: started + r.atMs + r.silentMs })),
  ];
  const verification = await verifyRun(url, runId, plans, driven, effectsDir, { from: workersFrom, to: workersTo }, faultWindows, driver.operator.stats);
  const webhookCheck: WebhookVerification = await verifyWebhooks(url, webhooks, drained.pending);
  await webhooks.close();
  const violate = (kind: string, message: string) => {
    verification.violationCounts[kind] = (verification.violationCounts[kind] ?? 0) + 1;
    if (verification.violations.length < 50) verification.violations.push(`${kind}: ${message}`);
  };
  for (const [kind, message] of webhookCheck.violations) violate(kind, message);
  const flowClient = new pg.Client({ connectionString: url });
  await flowClient.connect();
  let flow: FlowCounts;
  try {
    flow = await verifyFlow(
      flowClient,
      effectsDir,
      {
        kills: faults.workerKills.flatMap((k) => (k.pid === undefined ? [] : [{ pid: k.pid, at: started + k.atMs }])),
        databaseDown: [
          ...faults.databaseRestarts.map((r) => ({ from: started + r.atMs, to: started + r.atMs + r.tookMs })),
          ...faults.databaseSilences.map((r) => ({ from: started + r.atMs, to: started + r.atMs + r.silentMs })),
        ],
        leaseMs: Number(opts.leaseMs),
      },
      violate,
    );
  } finally {
    await flowClient.end();
  }
  for (const o of keyedSamples.overLimit) violate('keyed-over-limit-sampled', `${o.running} ${KEYED_TASK} executions of tenant ${o.tenant} held live leases at ${o.atMs} ms (limit ${KEYED_LIMIT})`);
  const verifyMs = Date.now() - verifyStarted;
  if (limitSamples.overLimit.length > 0) {
    verification.violationCounts['over-limit'] = limitSamples.overLimit.length;
    for (const o of limitSamples.overLimit.slice(0, 5)) verification.violations.push(`over-limit: ${o.running} ${LIMITED_TASK} executions running at ${o.atMs} ms (limit ${LIMIT})`);
  }
  const violationTotal = Object.values(verification.violationCounts).reduce((a, b) => a + b, 0);
  const report = {
    runId,
    seed,
    executions,
    flows,
    leaseMs: Number(opts.leaseMs),
    database: server.embedded ? 'embedded' : 'DATABASE_URL',
    durations: { totalMs: since(), drivingMs: driveMs, verifyMs, executionsPerSecond: Math.round((executions / driveMs) * 10000) / 10 },
    faults: {
      workerKills: faults.workerKills.length,
      workerRestartFailures: faults.workerRestartFailures,
      workerStartupMs: workers.flatMap((w) => w.startupMs),
      apiStartupMs: api.startupMs,
      databaseRestarts: faults.databaseRestarts,
      apiKills: faults.apiKills,
      databaseSilences: faults.databaseSilences,
    },
    client: driver.stats,
    operator: driver.operator.stats,
    latencyMsByKind: latencyByKind(driven),
    counts: verification.counts,
    limitSamples: { limit: LIMIT, max: limitSamples.max, samples: limitSamples.samples },
    flow: { ...flow, keyedSamples: { limit: KEYED_LIMIT, max: keyedSamples.max, samples: keyedSamples.samples } },
    webhooks: { ...webhookCheck.counts, drainMs: drained.waitedMs },
    violationCounts: verification.violationCounts,
    violations: verification.violations,
    ok: violationTotal === 0,
  };
  mkdirSync(path.join(ROOT, 'chaos-results'), { recursive: true });
  const file = path.join(ROOT, 'chaos-results', `${runId}.json`);
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  printReport(report, file);

  await server.stop().catch(() => undefined);
  if (!server.embedded) await dropDatabase(server.adminUrl, dbName).catch(() => undefined);
  if (opts.keep || violationTotal > 0) say(`kept ${dir} (logs, side effects${server.embedded ? ', database' : ''})`);
  else rmSync(dir, { recursive: true, force: true });
  process.exit(violationTotal === 0 ? 0 : 1);
}

function printReport(r: {
  executions: number;
  durations: { totalMs: number; drivingMs: number; executionsPerSecond: number };
  faults: {
    workerKills: number;
    workerRestartFailures: number;
    databaseRestarts: unknown[];
    apiKills: Array<{ openLongPolls: number; backAfterMs: number }>;
    databaseSilences: Array<{ silentMs: number }>;
  };
  client: { retries: number; scheduleRepeats: number; eventsDelivered: number; eventConflicts: number; cancelsSent: number };
  operator: OperatorStats;
  limitSamples: { limit: number; max: number; samples: number };
  flow: FlowCounts & { keyedSamples: { limit: number; max: number; samples: number } };
  webhooks: WebhookVerification['counts'] & { drainMs: number };
  counts: {
    byStatus: Record<string, number>;
    byKind: Partial<Record<string, Record<string, number>>>;
    stepRecords: number;
    sideEffectLines: number;
    unrecordedReruns: number;
    multiAttempt: number;
    retriedAfterFault: number;
    stepFailures: number;
    stepTimeouts: number;
    durableStepRetries: number;
    cronFires: number;
    cronSeconds: number;
    operations: OperateCounts;
    races: RaceCounts;
  };
  violationCounts: Record<string, number>;
  violations: string[];
  ok: boolean;
}, file: string): void {
  const line = (k: string, v: unknown) => process.stdout.write(`  ${k.padEnd(34)} ${String(v)}\n`);
  process.stdout.write('\nChaos report\n');
  line('executions', r.executions);
  line('by status', Object.entries(r.counts.byStatus).map(([k, v]) => `${k} ${v}`).join(', '));
  line('by kind', '');
  for (const [kind, statuses] of Object.entries(r.counts.byKind).sort(([a], [b]) => a.localeCompare(b))) line(`  ${kind}`, Object.entries(statuses ?? {}).map(([k, v]) => `${k} ${v}`).join(', '));
  line('duration (driving / total)', `${(r.durations.drivingMs / 1000).toFixed(1)} s / ${(r.durations.totalMs / 1000).toFixed(1)} s (${r.durations.executionsPerSecond}/s)`);
  line('worker SIGKILLs', `${r.faults.workerKills} (restart failures ${r.faults.workerRestartFailures})`);
  line('PostgreSQL restarts', r.faults.databaseRestarts.length);
  line('database silences', r.faults.databaseSilences.map((d) => `${(d.silentMs / 1000).toFixed(1)} s`).join(', ') || 0);
  line('API SIGKILLs', r.faults.apiKills.map((a) => `1 with ${a.openLongPolls} long-polls open, back after ${a.backAfterMs} ms`).join('; ') || 0);
  line('client retries', r.client.retries);
  line('schedule repeats (same key)', r.client.scheduleRepeats);
  line('events delivered / cancels sent', `${r.client.eventsDelivered} / ${r.client.cancelsSent}`);
  line('event deliveries answered 409, retried', r.client.eventConflicts);
  line('executions run on > 1 attempt', r.counts.multiAttempt);
  line('  of must-finish-first-attempt kinds', `${r.counts.retriedAfterFault} (each after a fault)`);
  line('failed step attempts kept', `${r.counts.stepFailures} (${r.counts.stepTimeouts} timeouts; ${r.counts.durableStepRetries} retries waited > 5 s)`);
  line('step records / side-effect lines', `${r.counts.stepRecords} / ${r.counts.sideEffectLines}`);
  line('unrecorded re-runs (allowed)', r.counts.unrecordedReruns);
  line('cron fire times started (<= 1 per second)', `${r.counts.cronFires} in ${r.counts.cronSeconds} s`);
  const { operator: op, counts: { operations: ops } } = r;
  line('operator retries: 200 / 409 (sent again)', `${op.retries.ok} / ${op.retries.conflicts} (${op.retries.unsure})`);
  line('  concurrent batches; races with a cancel', `${op.concurrentBatches}; ${op.cancelRaces} (cancel won ${op.cancelRacesWon})`);
  line('  retried to completion', `${ops.retriedToCompletion} (steps before the retry: ${ops.stepsBeforeRetry}, ${ops.stepsBeforeRetryRunOnce} run once, none after)`);
  line('bulk retries: matched / changed', `${op.bulkActions.length}: ${ops.bulkMatched} / ${ops.bulkChanged}`);
  for (const p of ops.pauses) line(`task paused: ${p.task}`, `${(p.ms / 1000).toFixed(1)} s, ${p.pendingAtResume} pending at resume, ${p.startedWhilePaused} started meanwhile`);
  line(`most ${LIMITED_TASK} running at once`, `${r.limitSamples.max} (limit ${r.limitSamples.limit}, ${r.limitSamples.samples} samples)`);
  const { keyed, rated, keyedSamples } = r.flow;
  const tenants = (by: Record<string, { executions?: number; starts?: number; mostAtOnce?: number; mostInWindow?: number }>) =>
    Object.entries(by).sort(([a], [b]) => a.localeCompare(b)).map(([t, v]) => `${t} ${v.executions ?? v.starts}/${v.mostAtOnce ?? v.mostInWindow}`).join(', ');
  line(`most ${KEYED_TASK} per tenant at once`, `${keyed.mostAtOnce} in handler runs, ${keyedSamples.max} live leases sampled (limit ${keyedSamples.limit}, ${keyedSamples.samples} samples)`);
  line('  executions / handler runs', `${keyed.executions} / ${keyed.runs} (${keyed.endedRuns} ended or killed, ${keyed.unendedRuns} unended; ${keyed.overDuringOutage} times over the limit with a run that overlapped a PostgreSQL restart, allowed)`);
  line('  per tenant: executions/most at once', tenants(keyed.byTenant));
  line(`most ${RATED_TASK} starts per tenant in ${RATE_PERIOD_MS} ms`, `${rated.mostInWindow} (limit ${RATE_LIMIT}; ${rated.starts} starts of ${rated.executions} executions)`);
  line('  per tenant: starts/most in a window', tenants(rated.byTenant));
  const races = r.counts.races;
  line('races: event / timer won', `${races.eventWins} / ${races.timerWins} (${Object.entries(races.checked).map(([k, v]) => `${k} ${v}`).join(', ')} checked; ${races.closedWaits} waits closed)`);
  line('  reminder approvals acked (late)', `${races.approvalsAcked} (${races.approvalsLate} reached a later round than planned)`);
  for (const l of races.lateExamples) process.stdout.write(`    ${l}\n`);
  const wh = r.webhooks;
  line('webhook requests / verified', `${wh.requests} / ${wh.verified} (${wh.signatureFailures} bad signatures)`);
  line('  answered 500 / too late (retried)', `${wh.answered500} / ${wh.answeredLate}`);
  line('  notifications (distinct ids)', `${wh.notifications}: ${Object.entries(wh.byType).map(([k, v]) => `${k.replace('execution.', '')} ${v}`).join(', ')}; ${wh.redelivered} redelivered`);
  line('  finished executions checked', `${wh.finishedChecked}; deliveries ${Object.entries(wh.deliveriesByStatus).map(([k, v]) => `${k} ${v}`).join(', ')}; drained in ${(wh.drainMs / 1000).toFixed(1)} s`);
  line('violations', Object.entries(r.violationCounts).map(([k, v]) => `${k} ${v}`).join(', ') || 0);
  for (const v of r.violations.slice(0, 20)) process.stdout.write(`    ${v}\n`);
  process.stdout.write(`  ${r.ok ? 'PASS' : 'FAIL'}; report: ${path.relative(process.cwd(), file)}\n`);
}

main().catch(async (err) => {
  process.stderr.write(`chaos: ${(err as Error).stack ?? String(err)}\n`);
  await cleanup().catch(() => undefined);
  process.exit(1);
});
