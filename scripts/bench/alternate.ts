// `make bench --baseline REV`: S1-S4 for the current build and the baseline (and, with --peers, the
// peers), one repetition at a time, alternating: for each repetition and scenario every contestant
// runs once, in an order shuffled from a seed, each on a fresh database. Load on the shared machine
// then falls on both sides alike, and the ratios current/baseline pair the runs of one repetition.
import { markdown } from './markdown';
import { medians, percentile, type ScenarioLine } from './scenarios';

/** What one repetition of a scenario gave a contestant. */
export interface Repetition {
  run?: Record<string, number | string | null>;
  n?: number | string;
  settings?: unknown;
  /** The contestant does not run this scenario (a peer without steps, say). */
  skipped?: string;
}

export interface Contestant {
  /** Its column in the tables: stepwise, stepwise@7f487d0, graphile-worker, ... */
  label: string;
  scenarios: string[];
  /** One repetition of scenario `s`, on a fresh database. */
  runOnce(s: string): Promise<Repetition>;
}

/** A current build and its baseline, compared: labels of two contestants. */
export interface Pair {
  name: string;
  current: string;
  baseline: string;
}

export interface Metric {
  scenario: string;
  key: string;
  label: string;
  better: 'higher' | 'lower';
}

export interface AlternationResult {
  lines: ScenarioLine[];
  /** Who ran when: one entry per repetition and scenario, labels in running order. */
  order: { rep: number; scenario: string; labels: string[] }[];
}

/** mulberry32: a small seeded generator, so an order can be run again. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffle<T>(items: T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/**
 * Runs `reps` rounds; a failed repetition is kept as an error on its line and the round goes on.
 * `progress` is called once per contestant run.
 */
export async function runAlternating(o: { contestants: Contestant[]; scenarios: string[]; reps: number; seed: number; progress: (step: string) => void }): Promise<AlternationResult> {
  const random = seededRandom(o.seed);
  const order: AlternationResult['order'] = [];
  const acc = new Map<string, { line: ScenarioLine; runs: Record<string, number | string | null>[]; errors: string[] }>();
  const entry = (c: Contestant, s: string) => {
    const key = `${c.label} ${s}`;
    if (!acc.has(key)) acc.set(key, { line: { peer: c.label, scenario: s }, runs: [], errors: [] });
    return acc.get(key)!;
  };
  // Lines in the contestants' order (the tables' columns), whoever happens to run first.
  for (const c of o.contestants) for (const s of o.scenarios.filter((x) => c.scenarios.includes(x))) entry(c, s);
  for (let rep = 1; rep <= o.reps; rep++) {
    for (const s of o.scenarios) {
      const here = shuffle(
        o.contestants.filter((c) => c.scenarios.includes(s)),
        random,
      );
      order.push({ rep, scenario: s, labels: here.map((c) => c.label) });
      for (const c of here) {
        const e = entry(c, s);
        try {
          const r = await c.runOnce(s);
          if (r.skipped) e.line.skipped = r.skipped;
          if (r.run) e.runs.push({ rep, ...r.run });
          if (r.n !== undefined) e.line.n = r.n;
          if (r.settings !== undefined) e.line.settings = r.settings;
        } catch (err) {
          e.errors.push(`rep ${rep}: ${(err as Error).message}`);
        }
        o.progress(`rep ${rep} ${c.label} ${s}`);
      }
    }
  }
  const lines = [...acc.values()].map(({ line, runs, errors }) => ({
    ...line,
    reps: runs.length,
    ...(runs.length > 0 ? { median: medians(runs.map(({ rep: _rep, ...r }) => r)), runs } : {}),
    ...(errors.length > 0 ? { error: errors.join('; ') } : {}),
  }));
  return { lines, order };
}

export interface Comparison {
  pair: string;
  scenario: string;
  metric: string;
  better: 'higher' | 'lower';
  current_median: number | null;
  baseline_median: number | null;
  /** current / baseline of the runs of one repetition, by repetition. */
  ratios: { rep: number; ratio: number }[];
  ratio_median: number | null;
}

const ratioOf = (a: unknown, b: unknown) => (typeof a === 'number' && typeof b === 'number' && b !== 0 ? a / b : undefined);

/** The ratios current/baseline of each metric, repetition by repetition, and their median. */
export function compare(lines: ScenarioLine[], pairs: Pair[], metrics: Metric[]): Comparison[] {
  const out: Comparison[] = [];
  for (const p of pairs) {
    for (const m of metrics) {
      const cur = lines.find((l) => l.peer === p.current && l.scenario === m.scenario);
      const base = lines.find((l) => l.peer === p.baseline && l.scenario === m.scenario);
      if (!cur && !base) continue;
      const ratios: Comparison['ratios'] = [];
      for (const run of cur?.runs ?? []) {
        const other = base?.runs?.find((b) => b.rep === run.rep);
        const ratio = ratioOf(run[m.key], other?.[m.key]);
        if (ratio !== undefined) ratios.push({ rep: Number(run.rep), ratio });
      }
      out.push({
        pair: p.name,
        scenario: m.scenario,
        metric: m.key,
        better: m.better,
        current_median: cur?.median?.[m.key] ?? null,
        baseline_median: base?.median?.[m.key] ?? null,
        ratios,
        ratio_median: percentile(
          ratios.map((r) => r.ratio),
          50,
        ),
      });
    }
  }
  return out;
}

/** The comparison as a Markdown table: medians of both builds, the ratios per repetition and theirs. */
export function comparisonTable(comparisons: Comparison[], metrics: Metric[], baselineName: string): string[] {
  const rows = [['scenario', 'current', baselineName, 'current/baseline by rep', 'median ratio', 'better']];
  const fmt = (x: number | null) => (x == null ? 'n/a' : String(x));
  for (const c of comparisons) {
    const label = metrics.find((m) => m.scenario === c.scenario && m.key === c.metric)?.label ?? `${c.scenario} ${c.metric}`;
    rows.push([
      c.pair === 'stepwise' ? label : `${label} [${c.pair}]`,
      fmt(c.current_median),
      fmt(c.baseline_median),
      c.ratios.map((r) => r.ratio.toFixed(3)).join(' ') || '-',
      c.ratio_median == null ? '-' : c.ratio_median.toFixed(3),
      c.better === 'higher' ? '> 1' : '< 1',
    ]);
  }
  return markdown(rows);
}
