import type { ThroughputBucket } from '../../src/client';
import { buildThroughputChart, niceMax } from '../../src/ui/throughput';

const T0 = Date.parse('2024-10-30T12:00:00.000Z');
const bucket = (i: number, created: number, completed: number, failed: number): ThroughputBucket => ({
  start: new Date(T0 + i * 60_000).toISOString(),
  created,
  completed,
  failed,
});

describe('niceMax', () => {
  it('rounds the highest count up to 1, 2 or 5 times a power of ten, and an empty chart to 1', () => {
    expect([0, 1, 2, 3, 7, 10, 11, 38, 51, 999, 1001].map(niceMax)).toEqual([1, 1, 2, 5, 10, 10, 20, 50, 100, 1000, 2000]);
  });
});

describe('buildThroughputChart', () => {
  it('draws a bar per minute and series with a count, side by side in its slot, scaled to the nice top, and totals each series', () => {
    const chart = buildThroughputChart([bucket(0, 4, 0, 0), bucket(1, 0, 3, 1), bucket(2, 2, 2, 0), bucket(3, 0, 0, 0)], 400, 100);
    expect(chart.yMax).toBe(5);
    const byKey = Object.fromEntries(chart.series.map((s) => [s.key, s]));
    // Slots of 100: 10 free on each side, bars of 80 / 3 wide.
    const bars = (key: string) => byKey[key].bars.map((b) => [b.x, b.y, b.height, b.value]);
    expect(bars('created')).toEqual([
      [10, 20, 80, 4],
      [210, 60, 40, 2],
    ]);
    expect(bars('completed')).toEqual([
      [136.67, 40, 60, 3],
      [236.67, 60, 40, 2],
    ]);
    expect(bars('failed')).toEqual([[163.33, 80, 20, 1]]);
    expect(byKey.failed.bars[0]).toMatchObject({ width: 26.67, start: '2024-10-30T12:01:00.000Z' });
    expect(chart.series.map((s) => [s.label, s.total])).toEqual([
      ['Created', 6],
      ['Completed', 5],
      ['Failed', 1],
    ]);
    // The first of the busiest minutes (4 each).
    expect(chart.busiest).toEqual({ start: '2024-10-30T12:00:00.000Z', created: 4, completed: 0, failed: 0 });
  });

  it('draws nothing for a quiet hour, with no busiest minute', () => {
    const chart = buildThroughputChart([bucket(0, 0, 0, 0), bucket(1, 0, 0, 0)], 100, 50);
    expect(chart.yMax).toBe(1);
    expect(chart.series.every((s) => s.bars.length === 0 && s.total === 0)).toBe(true);
    expect(chart.busiest).toBeNull();
  });
});
