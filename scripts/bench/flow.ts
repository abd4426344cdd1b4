// The claim cost of each flow-control feature against a plain task (`make bench ARGS="--scenarios=
// --extras-only flow"`; opt-in, not in the default extras). Each variant is S2 with a different task:
// n (10,000, or --n) no-op executions scheduled first (over HTTP, as S2), then VACUUM ANALYZE;
// CHECKPOINT; one worker with concurrency 32 drains them; completed per second from just before the
// worker's start call to the last completed_at (S2's clock, scripts/bench/scenarios.ts drain()).
//
//   plain          S2 itself: the batched claim, fused with the completions
//   keyed          concurrency { limit: 32, key: '/tenant' }, 100 tenants (the target: within
//                  20 % of plain)
//   unkeyed-limit  concurrency { limit: 32 }
//   rate           rateLimit { limit: 1,000,000, period: '1s' }: never binds, so only its bookkeeping
//   rate-keyed     the same per '/tenant', 100 tenants
//   priority       S2's task, scheduled with priorities 0..9
//
// The tasks and payloads are FLOW_VARIANTS in stepwise-adapter.mjs. A throttled task (concurrency or
// rate limit) is claimed by src/store/transitions/claim-throttled.ts, one transaction per claim under
// an advisory lock (with the completions, in one round trip); the others by the batched claim. The worker counts its round trips by statement
// (scenario-child.mjs countRoundTrips), so the table says how many claims each variant took.
//
// Repetitions are interleaved (rep 1 of every variant, then rep 2, ..., each rep in a rotated order)
// so that a machine that slows down or speeds up during the run weighs on every variant alike; each
// run has a fresh database. Medians over the repetitions; the ratios are of medians.
//
// Where a throttled claim statement's own time goes (EXPLAIN ANALYZE on 10,000 pending rows over 100
// keys, fresh and half drained): `npx tsx scripts/bench/flow-explain.ts`.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ExtraResult } from './extra-result';
import { drain, loadAdapter, percentile } from './scenarios';

export const FLOW_VARIANT_NAMES = ['plain', 'keyed', 'unkeyed-limit', 'rate', 'rate-keyed', 'priority'] as const;

/** The target: keyed concurrency within 20 % of plain S2. */
const KEYED_TARGET = 0.8;

export interface FlowBenchOptions {
  env: NodeJS.ProcessEnv;
  reps: number;
  /** Executions per run (default 10,000, as S2). */
  n?: number;
  /** Variants to run (FLOW_VARIANT_NAMES, all by default); `plain` always runs, the ratios need it. */
  variants?: readonly string[];
  /** The adapter spec that schedules: `stepwise` (over HTTP, as S2; the default) or `stepwise:sql`. */
  spec?: string;
  /** Called after each run. */
  progress: (step: string) => void;
}

/** The variants a --flow-variants list names, plain first; throws on an unknown name. */
export function flowVariants(list: readonly string[] | undefined): string[] {
  const wanted = list && list.length > 0 ? list : FLOW_VARIANT_NAMES;
  const unknown = wanted.filter((v) => !(FLOW_VARIANT_NAMES as readonly string[]).includes(v));
  if (unknown.length > 0) throw new Error(`--flow-variants: no variant named ${unknown.join(', ')} (there are ${FLOW_VARIANT_NAMES.join(', ')})`);
  return ['plain', ...wanted.filter((v) => v !== 'plain')];
}

type Run = Record<string, number | string | null>;

const median = (values: number[]): number | null => percentile(values.filter((v) => Number.isFinite(v)), 50);
const num = (r: Run, k: string): number => (typeof r[k] === 'number' ? (r[k] as number) : NaN);
const fmtInt = (v: number | null) => (v == null ? 'n/a' : Math.round(v).toLocaleString('en'));
const fmt2 = (v: number | null) => (v == null ? 'n/a' : (Math.round(v * 100) / 100).toFixed(2));

/** Medians over a variant's runs of S2's figures and of the worker's counts. */
function summarize(runs: Run[], n: number) {
  const m = (k: string) => median(runs.map((r) => num(r, k)));
  const claimStatements = median(runs.map((r) => num(r, 'claims_claim_loop') + num(r, 'claims_claim_fused') + num(r, 'claims_claim_throttled')));
  const batches = m('claims_claim_batches');
  const claimed = m('claims_claimed');
  return {
    completed_s: m('completed_s'),
    completed_s_min: Math.min(...runs.map((r) => num(r, 'completed_s'))),
    completed_s_max: Math.max(...runs.map((r) => num(r, 'completed_s'))),
    drain_only_completed_s: m('drain_only_completed_s'),
    worker_cpu_cores: m('worker_cpu_cores'),
    succeeded_min: Math.min(...runs.map((r) => num(r, 'succeeded'))),
    // Statements that claim: the loop's batched claim, the fused complete-and-claim, the throttled claim.
    claim_statements: claimStatements,
    claim_empty: claimStatements == null || batches == null ? null : Math.max(0, claimStatements - batches),
    claimed_per_claim: batches && claimed ? claimed / batches : null,
    // Mean milliseconds from sending a claiming statement to its rows (every claim answers them
    // before its commit is acknowledged).
    claim_ms: median(runs.map((r) => (num(r, 'claims_ms_claim_loop') + num(r, 'claims_ms_claim_fused') + num(r, 'claims_ms_claim_throttled')) / (num(r, 'claims_claim_loop') + num(r, 'claims_claim_fused') + num(r, 'claims_claim_throttled')))),
    throttled_claims: m('claims_claim_throttled'),
    round_trips_per_1000: (() => {
      const rt = m('claims_round_trips');
      return rt == null ? null : (rt / n) * 1000;
    })(),
    // Where the drain's time went, summed over the run: claiming statements, completion-only
    // statements, and the elapsed time (medians).
    claim_total_ms: median(runs.map((r) => ['claim_loop', 'claim_fused', 'claim_throttled'].reduce((a, k) => a + num(r, `claims_ms_${k}`), 0))),
    complete_total_ms: m('claims_ms_complete'),
    elapsed_ms: m('elapsed_ms'),
    held_by_limit: median(runs.map((r) => num(r, 'claims_held_by_concurrency') + num(r, 'claims_held_by_rate'))),
  };
}

/** Runs the variants, interleaved, and reports them as one extra with a table. */
export async function flowClaimCost(o: FlowBenchOptions): Promise<ExtraResult> {
  const n = o.n ?? 10000;
  const spec = o.spec ?? 'stepwise';
  const variants = flowVariants(o.variants);
  const adapterModule = (await import(pathToFileURL(path.join(__dirname, 'stepwise-adapter.mjs')).href)) as {
    FLOW_VARIANTS: Record<string, { describe: string; flow: unknown }>;
  };
  const missing = FLOW_VARIANT_NAMES.filter((v) => !adapterModule.FLOW_VARIANTS[v]);
  if (missing.length > 0) throw new Error(`stepwise-adapter.mjs FLOW_VARIANTS lacks ${missing.join(', ')}`);
  const adapter = await loadAdapter(spec);
  const runs = new Map<string, Run[]>(variants.map((v) => [v, []]));
  const errors = new Map<string, string>();
  for (let rep = 0; rep < o.reps; rep++) {
    const order = variants.map((_, i) => variants[(i + rep) % variants.length]);
    for (const v of order) {
      if (!errors.has(v)) {
        try {
          (runs.get(v) as Run[]).push(await drain({ env: o.env, spec }, adapter, n, v, true));
        } catch (err) {
          errors.set(v, (err as Error).message.split('\n')[0].slice(0, 300));
        }
      }
      o.progress(`flow ${v} ${rep + 1}/${o.reps}`);
    }
  }

  const stats = new Map(variants.filter((v) => !errors.has(v)).map((v) => [v, summarize(runs.get(v) as Run[], n)]));
  const plain = stats.get('plain')?.completed_s ?? null;
  const ratio = (v: string) => {
    const x = stats.get(v)?.completed_s;
    return x == null || !plain ? null : x / plain;
  };
  const header = [
    'variant',
    'flow control',
    'completed/s (median)',
    'min-max',
    'vs plain',
    'drain-only/s',
    'claim statements (empty)',
    'claimed per claim',
    'claim ms (mean)',
    'round trips per 1,000',
    'ms claiming / completing / elapsed',
    'held by limit',
    'worker CPU',
  ];
  const rows: string[][] = [header];
  const values: ExtraResult['values'] = { n, reps: o.reps, spec, plain_completed_s: plain ?? 'n/a' };
  for (const v of variants) {
    const describe = adapterModule.FLOW_VARIANTS[v].describe;
    const s = stats.get(v);
    if (!s) {
      rows.push([v, describe, `failed: ${errors.get(v)}`, ...header.slice(3).map(() => '')]);
      values[`${v}_failed`] = errors.get(v) as string;
      continue;
    }
    const r = ratio(v);
    const incomplete = s.succeeded_min < n ? ` (only ${s.succeeded_min} succeeded)` : '';
    rows.push([
      v,
      describe,
      `${fmtInt(s.completed_s)}${incomplete}`,
      `${fmtInt(s.completed_s_min)}-${fmtInt(s.completed_s_max)}`,
      r == null ? 'n/a' : `${fmt2(r)} x`,
      fmtInt(s.drain_only_completed_s),
      s.claim_statements == null ? 'n/a' : `${fmtInt(s.claim_statements)} (${fmtInt(s.claim_empty)})`,
      s.claimed_per_claim == null ? 'n/a' : s.claimed_per_claim.toFixed(1),
      s.claim_ms == null ? 'n/a' : s.claim_ms.toFixed(1),
      fmtInt(s.round_trips_per_1000),
      `${fmtInt(s.claim_total_ms)} / ${fmtInt(s.complete_total_ms)} / ${fmtInt(s.elapsed_ms)}`,
      fmtInt(s.held_by_limit),
      fmt2(s.worker_cpu_cores),
    ]);
    for (const [k, x] of Object.entries(s)) if (x != null && Number.isFinite(x)) values[`${v}_${k}`] = Math.round((x as number) * 100) / 100;
    if (r != null) values[`${v}_ratio_to_plain`] = Math.round(r * 1000) / 1000;
  }
  const keyed = ratio('keyed');
  const verdict =
    keyed == null
      ? ''
      : `keyed ${fmt2(keyed)} x plain (${fmtInt(stats.get('keyed')?.completed_s ?? null)} vs ${fmtInt(plain)}/s; the issue's target >= ${KEYED_TARGET}: ${keyed >= KEYED_TARGET ? 'met' : 'NOT met'})`;
  const others = variants
    .filter((v) => v !== 'plain' && v !== 'keyed')
    .map((v) => (errors.has(v) ? `${v} failed` : `${v} ${fmt2(ratio(v))} x`))
    .join(', ');
  if (keyed != null) values.keyed_target_met = keyed >= KEYED_TARGET;
  return {
    label: `flow-control claim cost (S2-style: ${n.toLocaleString('en')} no-op executions, one worker at concurrency 32; medians of ${o.reps} interleaved reps)`,
    summary: [plain == null ? `plain failed: ${errors.get('plain') ?? 'no figure'}` : `plain ${fmtInt(plain)}/s`, verdict, others].filter(Boolean).join('; '),
    values,
    table: rows,
    notes: [
      'completed/s: S2\'s figure, n / (last completed_at - just before the worker\'s start call); drain-only/s starts at the first handler start instead.',
      'claim statements: the worker\'s claiming round trips (batched loop claims + claims fused with completions + throttled claims), "empty" those that claimed nothing;',
      '  claimed per claim: executions per claim that took any; claim ms: mean time from sending a claiming statement to its rows (all of them answer before their commit:',
      '  a throttled claim is one simple query, BEGIN, the lock, the completions, the claim and COMMIT, whose claim rows come before the COMMIT is answered);',
      '  round trips per 1,000: every statement the worker sent, per 1,000 executions; held by limit: claims that left due executions although the worker had room.',
      '  ms claiming / completing / elapsed: the run\'s total time in claiming round trips and in completion-only statements, against its elapsed time.',
      'Figures are medians over the reps (min-max: completed/s over the reps). Only a keyed concurrency limit claims into prefetch room; a rate limit or an unkeyed',
      '  limit claims into free handler slots only, 32 at most.',
    ],
    runs: Object.fromEntries([...runs].map(([v, r]) => [v, r])),
  };
}
