/** Pure: the geometry of the throughput chart (executions created, completed and failed per minute). No DOM. */
import type { ThroughputBucket } from '../client';

export type SeriesKey = 'created' | 'completed' | 'failed';

/** Side by side in each minute's slot, in this order. */
export const SERIES: ReadonlyArray<{ key: SeriesKey; label: string }> = Object.freeze([
  { key: 'created', label: 'Created' },
  { key: 'completed', label: 'Completed' },
  { key: 'failed', label: 'Failed' },
]);

/** The smallest of 1, 2, 5, 10, 20, 50… at or above `n`: a y-axis top that reads well. */
export function niceMax(n: number): number {
  if (!(n > 0)) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(n));
  for (const step of [1, 2, 5, 10]) if (step * magnitude >= n) return step * magnitude;
  return 10 * magnitude;
}

/** One minute's bar of a series, in the chart's box (y grows downwards). */
export interface ChartBar {
  x: number;
  y: number;
  width: number;
  height: number;
  start: string;
  value: number;
}

export interface ChartSeries {
  key: SeriesKey;
  label: string;
  /** A bar per minute with a count: a minute without any draws nothing, so quiet minutes stay blank. */
  bars: ChartBar[];
  total: number;
}

export interface ThroughputChartModel {
  width: number;
  height: number;
  /** The value at the top of the box. */
  yMax: number;
  series: ChartSeries[];
  /** The minute with the most executions created, completed or failed; null when all are zero. */
  busiest: { start: string; created: number; completed: number; failed: number } | null;
}

/** A minute's slot: a tenth of it free on each side, the rest shared by the series' bars. */
const GAP = 0.1;

/**
 * Places the bars in a `width` × `height` box, a slot per minute and the series side by side in it,
 * the top at `niceMax` of the highest count.
 */
export function buildThroughputChart(buckets: readonly ThroughputBucket[], width: number, height: number): ThroughputChartModel {
  const highest = Math.max(0, ...buckets.flatMap((b) => SERIES.map((s) => b[s.key])));
  const yMax = niceMax(highest);
  const slot = buckets.length > 0 ? width / buckets.length : width;
  const barWidth = (slot * (1 - 2 * GAP)) / SERIES.length;
  const round = (v: number) => Math.round(v * 100) / 100;
  const series = SERIES.map(({ key, label }, j) => ({
    key,
    label,
    bars: buckets.flatMap((b, i): ChartBar[] => {
      if (b[key] === 0) return [];
      const h = (b[key] / yMax) * height;
      return [{ x: round(slot * (i + GAP) + barWidth * j), y: round(height - h), width: round(barWidth), height: round(h), start: b.start, value: b[key] }];
    }),
    total: buckets.reduce((n, b) => n + b[key], 0),
  }));
  let busiest: ThroughputChartModel['busiest'] = null;
  for (const b of buckets) {
    const n = b.created + b.completed + b.failed;
    if (n > 0 && (busiest === null || n > busiest.created + busiest.completed + busiest.failed)) busiest = { start: b.start, created: b.created, completed: b.completed, failed: b.failed };
  }
  return { width, height, yMax, series, busiest };
}
