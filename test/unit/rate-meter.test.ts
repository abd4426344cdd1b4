import { RateMeter } from '../../src/domain/rate-meter';

describe('rate meter', () => {
  test('a steady rate is approached within a few half-lives', () => {
    let now = 0;
    const meter = new RateMeter(20, () => now);
    for (let ms = 0; ms < 200; ms++) {
      now = ms;
      meter.record(3);
    }
    now = 200;
    expect(meter.perMs()).toBeCloseTo(3, 1);
  });

  test('nothing is folded in before a half-life has passed', () => {
    let now = 0;
    const meter = new RateMeter(20, () => now);
    meter.record(100);
    now = 19;
    expect(meter.perMs()).toBe(0);
    now = 20;
    expect(meter.perMs()).toBeCloseTo(2.5, 5);
  });

  test('once the events stop, the rate halves with every half-life', () => {
    let now = 0;
    const meter = new RateMeter(20, () => now);
    for (let ms = 0; ms < 400; ms++) {
      now = ms;
      meter.record(1);
    }
    now = 400;
    const busy = meter.perMs();
    now = 440;
    expect(meter.perMs()).toBeCloseTo(busy / 4, 5);
  });
});
