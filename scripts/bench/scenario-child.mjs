// A role of a benchmark scenario, in a process of its own (forked by scripts/bench/scenarios.ts with
// IPC), as the peers' harness runs its roles, so the figures compare:
//   node scenario-child.mjs <adapter spec> <role> <database url> <json options>
// roles: setup | enqueue | worker | producer. Plain JavaScript, no tsx: it loads the adapter, which
// loads the compiled build (STEPWISE_DIST).
import pg from 'pg';
import { make, scheduleShape } from './stepwise-adapter.mjs';

const [, , spec, role, url, optsJson] = process.argv;
const opts = JSON.parse(optsJson || '{}');
const send = (m) => new Promise((resolve) => process.send(m, resolve));

/** Wall clock in epoch ms with sub-millisecond resolution, comparable across processes on one host. */
const now = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function runPool(n, conc, fn) {
  let next = 0;
  const lanes = [];
  for (let l = 0; l < Math.min(conc, n); l++) {
    lanes.push(
      (async () => {
        for (;;) {
          const i = next++;
          if (i >= n) return;
          await fn(i);
        }
      })(),
    );
  }
  await Promise.all(lanes);
}

process.on('disconnect', () => process.exit(1)); // the driver went away

/**
 * Counts the statements this process sends to PostgreSQL, by what they are, from the prepared
 * statements' names (src/store): one pg query is one round trip. A counter and a clock read per
 * call, so it costs the worker nothing measurable. Also holds the worker observer's counts.
 */
function countRoundTrips() {
  const counts = {
    round_trips: 0,
    claim_loop: 0, // stepwise_claim_*: the batched claim of the worker loop
    claim_fused: 0, // stepwise_complete_and_claim_*: completions and a claim in one statement
    claim_throttled: 0, // EXECUTE stepwise_claim_throttled_*: a throttled claim (BEGIN, lock, completions, claim, COMMIT: one round trip)
    complete: 0, // stepwise_complete: completions alone
    other: 0,
    claim_batches: 0, // non-empty claims, as the Worker's observer saw them
    claimed: 0,
    held_by_concurrency: 0, // claims that left due executions behind although the worker had room
    held_by_rate: 0,
  };
  // Milliseconds from each statement's send to its answer, summed by kind: ms_<kind>. The batched
  // claims answer with their rows before their commit is acknowledged (src/store/db.ts
  // preparedRowsBeforeCommit): timed to the rows, what the worker waits for.
  for (const k of ['claim_loop', 'claim_fused', 'claim_throttled', 'complete', 'other']) counts[`ms_${k}`] = 0;
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function countedQuery(config, ...rest) {
    const name = typeof config === 'object' && config !== null ? config.name : undefined;
    const text = typeof config === 'string' ? config : (config?.text ?? '');
    let kind = 'other';
    if (text.includes('EXECUTE stepwise_claim_throttled_')) kind = 'claim_throttled';
    else if (name?.startsWith('stepwise_complete_and_claim_')) kind = 'claim_fused';
    else if (name?.startsWith('stepwise_claim_')) kind = 'claim_loop';
    else if (name === 'stepwise_complete') kind = 'complete';
    counts.round_trips++;
    counts[kind]++;
    const t0 = performance.now();
    const took = () => void (counts[`ms_${kind}`] += performance.now() - t0);
    const result = query.call(this, config, ...rest);
    if (result && typeof result.then === 'function') result.then(took, took);
    else if (config?.executed && typeof config.executed.then === 'function') config.executed.then(took, took);
    else if (config && typeof config.submit === 'function' && typeof config.once === 'function') {
      config.once('end', took);
      config.once('error', took);
    }
    return result;
  };
  return counts;
}

async function main() {
  const adapter = make(spec.split(':')[1]);

  if (role === 'setup') {
    await adapter.setup(url, opts);
    await send({ type: 'done' });
    process.exit(0);
  }

  if (role === 'enqueue') {
    // S1, and the preload of S2/S3: n schedules, `conc` in flight, after `warmup` untimed ones.
    const { n, conc = 32, kind = 'noop', warmup = 0 } = opts;
    const p = await adapter.producer(url, { poolSize: conc });
    for (let i = 0; i < warmup; i++) await p.enqueue({ i: -1 - i, t: now(), warm: true }, kind);
    const c0 = process.cpuUsage();
    const t0 = now();
    await runPool(n, conc, (i) => {
      // S2/S3's kinds add nothing to { i, t }; a flow variant may add a key and a priority.
      const shape = scheduleShape(kind, i);
      return p.enqueue({ i, t: now(), ...shape.data }, kind, shape.options);
    });
    const t1 = now();
    const cu = process.cpuUsage(c0);
    await p.close();
    await send({ type: 'done', elapsed_ms: t1 - t0, n, cpu_cores: (cu.user + cu.system) / 1000 / (t1 - t0) });
    process.exit(0);
  }

  if (role === 'worker') {
    let starts = 0;
    let firstStart = null;
    const lat = []; // handler start - just before the schedule call (ms), measured executions only
    const onStart = (payload) => {
      const t = now();
      starts++;
      if (firstStart === null) firstStart = t;
      if (payload && typeof payload.t === 'number' && !payload.warm) lat.push(t - payload.t);
    };
    // With `count` (the flow benchmark), the worker's claims and database round trips are counted.
    const counts = opts.count ? countRoundTrips() : undefined;
    const observer = counts
      ? {
          claimed: (batch) => {
            counts.claim_batches++;
            counts.claimed += batch.length;
          },
          throttled: (_task, limit) => void (counts[`held_by_${limit}`] += 1),
        }
      : undefined;
    const cpu0 = process.cpuUsage();
    const tCall = now();
    const w = await adapter.worker(url, { concurrency: opts.concurrency ?? 32, kind: opts.kind ?? 'noop', onStart, observer });
    const tReady = now();
    await send({ type: 'ready', tCall, tReady });
    process.on('message', async (m) => {
      if (m.type === 'stats') {
        const cpu = process.cpuUsage(cpu0);
        await send({ type: 'stats', starts, firstStart, lat: opts.wantLat ? lat : undefined, cpu_ms: (cpu.user + cpu.system) / 1000, counts: counts && { ...counts } });
      } else if (m.type === 'stop') {
        const timer = setTimeout(() => process.exit(0), 15000);
        await w.stop().catch((e) => console.error('[bench worker] stop failed:', e.message));
        clearTimeout(timer);
        await send({ type: 'stopped' });
        process.exit(0);
      }
    });
    return;
  }

  if (role === 'producer') {
    // S4: one schedule every intervalMs for durationMs, fire and forget on a drift-corrected clock;
    // a second connection polls for completions every pollMs.
    const { intervalMs = 20, durationMs = 10000, pollMs = 2, warmupJobs = 25 } = opts;
    const p = await adapter.producer(url, { poolSize: 4 });
    const obs = new pg.Client({ connectionString: url });
    await obs.connect();
    const outstanding = new Map();
    const e2e = [];
    const enqCall = [];
    let enqueuing = true;
    let errors = 0;
    const observer = (async () => {
      while (enqueuing || outstanding.size) {
        if (outstanding.size) {
          const done = await adapter.doneAmong(obs, [...outstanding.keys()]);
          const t = now();
          for (const id of done) {
            const rec = outstanding.get(id);
            if (!rec) continue;
            outstanding.delete(id);
            if (rec.measure) e2e.push(t - rec.t);
          }
        }
        await sleep(pollMs);
      }
    })();
    const fire = (i, measure) => {
      const t = now();
      return p
        .enqueue(measure ? { i, t } : { i, t, warm: true }, 'noop')
        .then((id) => {
          if (measure) enqCall.push(now() - t);
          outstanding.set(String(id), { t, measure });
        })
        .catch((e) => {
          errors++;
          console.error('[bench producer] schedule failed:', e.message);
        });
    };
    const schedule = async (count, measure) => {
      const pending = [];
      const base = now();
      for (let i = 0; i < count; i++) {
        const wait = base + i * intervalMs - now();
        if (wait > 0) await sleep(wait);
        pending.push(fire(i, measure));
      }
      await Promise.all(pending);
    };
    await schedule(warmupJobs, false);
    const tw = now();
    while (outstanding.size && now() - tw < 10000) await sleep(5);
    const n = Math.round(durationMs / intervalMs);
    const t0 = now();
    await schedule(n, true);
    const tEnd = now();
    const deadline = now() + 60000;
    while (outstanding.size && now() < deadline) await sleep(10);
    const timedOut = outstanding.size;
    enqueuing = false;
    outstanding.clear();
    await observer;
    await obs.end();
    await p.close();
    await send({ type: 'done', n, e2e, enqCall, errors, timedOut, actualRate: n / ((tEnd - t0) / 1000) });
    process.exit(0);
  }

  throw new Error(`unknown role ${role}`);
}

main().catch(async (e) => {
  console.error(`[bench ${spec} ${role}] failed:`, e);
  try {
    await send({ type: 'error', message: String(e?.stack || e) });
  } catch {
    // the driver is gone
  }
  process.exit(1);
});
