/** A task's flow control (concurrency, rate limit, debounce) in plain words, for the dashboard and the CLI. */

/** A task's limits as GET /tasks shows them. */
export interface TaskLimits {
  concurrency: { limit: number; key: string | null } | null;
  rate_limit: { limit: number; period_ms: number; key: string | null } | null;
  debounce: { period_ms: number; key: string | null } | null;
}

const UNITS: [string, number][] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
  ['ms', 1],
];

/** A period as it was most likely written: `1m`, `5s`, `1h 30m`, `250ms`; at most two units. */
export function formatPeriod(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) return `${ms}ms`;
  const parts: string[] = [];
  let rest = Math.round(ms);
  for (const [unit, size] of UNITS) {
    if (parts.length === 2) break;
    const n = Math.floor(rest / size);
    if (n > 0) parts.push(`${n}${unit}`);
    rest -= n * size;
  }
  return parts.join(' ');
}

const perKey = (key: string | null) => (key === null ? '' : ` per ${key}`);

export type FlowLimit = { kind: 'concurrency' | 'rate-limit' | 'debounce'; text: string; title: string };

/** `5 at once per /tenantId`, `100 per 1m per /tenantId`, `debounce 5s per /user`: the task's limits, in that order. */
export function describeLimits(task: TaskLimits): FlowLimit[] {
  const limits: FlowLimit[] = [];
  const { concurrency: c, rate_limit: r, debounce: d } = task;
  if (c) {
    limits.push({
      kind: 'concurrency',
      text: `${c.limit} at once${perKey(c.key)}`,
      title: `At most ${c.limit} running at once over all workers${c.key === null ? '' : `, for each value of ${c.key} in the data`}.`,
    });
  }
  if (r) {
    limits.push({
      kind: 'rate-limit',
      text: `${r.limit} per ${formatPeriod(r.period_ms)}${perKey(r.key)}`,
      title: `At most ${r.limit} starts in any ${formatPeriod(r.period_ms)} over all workers${r.key === null ? '' : `, for each value of ${r.key} in the data`}.`,
    });
  }
  if (d) {
    limits.push({
      kind: 'debounce',
      text: `debounce ${formatPeriod(d.period_ms)}${perKey(d.key)}`,
      title: `A schedule within ${formatPeriod(d.period_ms)} of the last${d.key === null ? '' : ` with the same ${d.key}`} replaces the pending execution's data and pushes its start.`,
    });
  }
  return limits;
}
