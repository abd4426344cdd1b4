// The flow-control checks of `make chaos`, after the run: `chaos.keyed` never ran more than its limit
// at once per tenant, and `chaos.rated` never started more than its limit of attempts per tenant in any
// window of its period, whatever was killed or restarted meanwhile. (That each of their executions
// ended as its data says is checked with every other kind's, in verify.ts.)
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { KEYED_LIMIT, KEYED_TASK, RATE_LIMIT, RATE_PERIOD_MS, RATED_TASK } from './outcomes';

type Violate = (kind: string, message: string) => void;

export interface FlowCounts {
  keyed: {
    executions: number;
    /** Handler runs (`~enter` lines), those whose end is known (an `~exit` line, or their process's SIGKILL), and the others. */
    runs: number;
    endedRuns: number;
    unendedRuns: number;
    /** The most runs of one tenant inside the handler at once, over the run. */
    mostAtOnce: number;
    /** Instants above the limit with a run inside that was running while PostgreSQL was away (its lease may have lapsed: allowed). */
    overDuringOutage: number;
    byTenant: Record<string, { executions: number; mostAtOnce: number }>;
  };
  rated: {
    executions: number;
    /** Attempts started (first attempts, retries, takeovers), from their start stamps. */
    starts: number;
    /** The most starts of one tenant in any window of the period. */
    mostInWindow: number;
    byTenant: Record<string, { starts: number; mostInWindow: number }>;
  };
}

export interface FlowFaults {
  /** Worker processes SIGKILLed: their pid, and an instant (epoch ms) after which they had exited. */
  kills: ReadonlyArray<{ pid: number; at: number }>;
  /** PostgreSQL restarts (epoch ms): leases may lapse while it is away, and a lapsed lease no longer counts. */
  databaseDown: ReadonlyArray<{ from: number; to: number }>;
  leaseMs: number;
}

interface Mark {
  executionId: string;
  attempt: number;
  at: number;
  pid: number;
}

/** The `~enter` and `~exit` lines of the side-effect logs (one file per worker process, named by its pid). */
function readMarks(dir: string): { enters: Mark[]; exits: Mark[] } {
  const enters: Mark[] = [];
  const exits: Mark[] = [];
  for (const file of readdirSync(dir)) {
    const m = /^worker-(\d+)\.log$/.exec(file);
    if (!m) continue;
    const pid = Number(m[1]);
    for (const line of readFileSync(path.join(dir, file), 'utf8').split('\n')) {
      const [executionId, step, attempt, at, run] = line.split(' ');
      if (!run || (step !== '~enter' && step !== '~exit')) continue;
      (step === '~enter' ? enters : exits).push({ executionId, attempt: Number(attempt), at: Number(at), pid });
    }
  }
  return { enters, exits };
}

/** The most stamps (sorted, in microseconds) within any window of `periodUs` (a stamp a whole period after another is outside its window). */
function mostInAnyWindow(stamps: readonly number[], periodUs: number): number {
  let most = 0;
  for (let i = 0, j = 0; j < stamps.length; j++) {
    while (stamps[j] - stamps[i] >= periodUs) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

const micros = (column: string) => `(extract(epoch FROM ${column}) * 1000000)::bigint::text`;

export async function verifyFlow(client: pg.Client, effectsDir: string, faults: FlowFaults, violate: Violate): Promise<FlowCounts> {
  // The keys, as the executions were inserted with them (migration 015): the tenant, for both tasks.
  const { rows: executions } = await client.query<{ id: string; task: string; tenant: string | null; concurrency_key: string | null; rate_key: string | null }>(
    `SELECT id, task, data->>'tenant' AS tenant, concurrency_key, rate_key FROM stepwise.executions WHERE task = ANY($1::text[])`,
    [[KEYED_TASK, RATED_TASK]],
  );
  for (const e of executions) {
    const [want, got] = e.task === KEYED_TASK ? [[e.tenant, null], [e.concurrency_key, e.rate_key]] : [[null, e.tenant], [e.concurrency_key, e.rate_key]];
    if (e.tenant === null || want[0] !== got[0] || want[1] !== got[1]) {
      violate('flow-key', `${e.id} (${e.task}, tenant ${e.tenant}) has concurrency_key ${e.concurrency_key}, rate_key ${e.rate_key}`);
    }
  }

  // chaos.keyed: the handler runs of each tenant, from `~enter` to `~exit` (or to the SIGKILL of the
  // process it ran in), never more than the limit at once. A run inside the handler holds a live lease
  // from its claim to its completion, and the claim counts live leases per key; but a lease lapses
  // (and no longer counts) when its renewals fail, which they do while PostgreSQL is away, with its
  // handler still running. So an excess is allowed, and counted apart, only when one of the runs inside
  // ran while PostgreSQL was away or within a lease after.
  const tenantOf = new Map(executions.filter((e) => e.task === KEYED_TASK).map((e) => [e.id, e.tenant ?? '']));
  const { enters, exits } = readMarks(effectsDir);
  // A pid may come again (rarely): a run ends at the first SIGKILL of its pid after it entered.
  const killsOf = new Map<number, number[]>();
  for (const k of faults.kills) killsOf.set(k.pid, [...(killsOf.get(k.pid) ?? []), k.at].sort((a, b) => a - b));
  const exitsByRun = new Map<string, Mark[]>();
  for (const x of exits) {
    const key = `${x.executionId} ${x.attempt} ${x.pid}`;
    exitsByRun.set(key, [...(exitsByRun.get(key) ?? []), x]);
  }
  for (const list of exitsByRun.values()) list.sort((a, b) => a.at - b.at);
  const exposed = (from: number, to: number) => faults.databaseDown.some((d) => from <= d.to + faults.leaseMs && to >= d.from);
  const intervals = new Map<string, Array<{ from: number; to: number; id: string; exposed: boolean }>>();
  let endedRuns = 0;
  let unendedRuns = 0;
  for (const enter of enters.sort((a, b) => a.at - b.at)) {
    const tenant = tenantOf.get(enter.executionId);
    if (tenant === undefined) {
      violate('flow-marks', `~enter of ${enter.executionId}, which is no ${KEYED_TASK} execution`);
      continue;
    }
    const candidates = exitsByRun.get(`${enter.executionId} ${enter.attempt} ${enter.pid}`) ?? [];
    const exitIndex = candidates.findIndex((x) => x.at >= enter.at);
    const exit = exitIndex >= 0 ? candidates.splice(exitIndex, 1)[0] : undefined;
    const to = exit?.at ?? killsOf.get(enter.pid)?.find((at) => at >= enter.at);
    if (to === undefined) {
      unendedRuns += 1;
      continue;
    }
    endedRuns += 1;
    intervals.set(tenant, [...(intervals.get(tenant) ?? []), { from: enter.at, to, id: enter.executionId, exposed: exposed(enter.at, to) }]);
  }
  for (const [key, left] of exitsByRun) if (left.length > 0) violate('flow-marks', `${left.length} ~exit line(s) of ${key} without an ~enter before`);
  const keyedByTenant: FlowCounts['keyed']['byTenant'] = {};
  let overDuringOutage = 0;
  for (const e of executions) if (e.task === KEYED_TASK) (keyedByTenant[e.tenant ?? ''] ??= { executions: 0, mostAtOnce: 0 }).executions += 1;
  for (const [tenant, list] of intervals) {
    // At each run's start, the runs inside: started no later, and ended after (in milliseconds, so a run
    // that ended in the same millisecond as another started is not counted with it, nor is a replay
    // that entered and left within one millisecond).
    list.sort((a, b) => a.from - b.from);
    const stats = (keyedByTenant[tenant] ??= { executions: 0, mostAtOnce: 0 });
    for (const run of list) {
      if (run.to <= run.from) continue;
      const inside = list.filter((r) => r.from <= run.from && r.to > run.from);
      stats.mostAtOnce = Math.max(stats.mostAtOnce, inside.length);
      if (inside.length <= KEYED_LIMIT) continue;
      if (inside.some((r) => r.exposed)) overDuringOutage += 1;
      else {
        const runs = inside.map((r) => `${r.id} ${new Date(r.from).toISOString().slice(11)}-${new Date(r.to).toISOString().slice(11)}`);
        violate('keyed-over-limit', `${inside.length} ${KEYED_TASK} runs of tenant ${tenant} inside the handler at ${new Date(run.from).toISOString()} (limit ${KEYED_LIMIT}): ${runs.join(', ')}`);
      }
    }
  }

  // chaos.rated: every attempt's start stamp (an attempt's start is the instant its claim stamped in
  // the rate log): the attempts that ended keep theirs in stepwise.attempts, the last one is on the
  // execution. Per tenant, sorted, the (i + limit)th is at least a period after the ith.
  const { rows: starts } = await client.query<{ id: string; attempt: number; tenant: string | null; at: string }>(
    `SELECT e.id, a.attempt, e.rate_key AS tenant, ${micros('a.started_at')} AS at
       FROM stepwise.attempts a JOIN stepwise.executions e ON e.id = a.execution_id
      WHERE e.task = $1 AND a.started_at IS NOT NULL
     UNION
     SELECT e.id, e.attempt, e.rate_key, ${micros('e.attempt_started_at')}
       FROM stepwise.executions e WHERE e.task = $1 AND e.attempt > 0 AND e.attempt_started_at IS NOT NULL`,
    [RATED_TASK],
  );
  const stampsByTenant = new Map<string, number[]>();
  for (const s of starts) stampsByTenant.set(s.tenant ?? '', [...(stampsByTenant.get(s.tenant ?? '') ?? []), Number(s.at)]);
  const ratedByTenant: FlowCounts['rated']['byTenant'] = {};
  const periodUs = RATE_PERIOD_MS * 1000;
  for (const [tenant, stamps] of stampsByTenant) {
    stamps.sort((a, b) => a - b);
    for (let i = 0; i + RATE_LIMIT < stamps.length; i++) {
      const gapUs = stamps[i + RATE_LIMIT] - stamps[i];
      if (gapUs < periodUs) {
        violate('rate-over-limit', `${RATED_TASK} tenant ${tenant}: ${RATE_LIMIT + 1} starts within ${gapUs / 1000} ms, from ${new Date(stamps[i] / 1000).toISOString()} (limit ${RATE_LIMIT} per ${RATE_PERIOD_MS} ms)`);
      }
    }
    ratedByTenant[tenant] = { starts: stamps.length, mostInWindow: mostInAnyWindow(stamps, periodUs) };
  }

  const keyedTenants = Object.values(keyedByTenant);
  const ratedTenants = Object.values(ratedByTenant);
  return {
    keyed: {
      executions: tenantOf.size,
      runs: enters.length,
      endedRuns,
      unendedRuns,
      mostAtOnce: Math.max(0, ...keyedTenants.map((t) => t.mostAtOnce)),
      overDuringOutage,
      byTenant: keyedByTenant,
    },
    rated: {
      executions: executions.length - tenantOf.size,
      starts: starts.length,
      mostInWindow: Math.max(0, ...ratedTenants.map((t) => t.mostInWindow)),
      byTenant: ratedByTenant,
    },
  };
}
