import { computeDeadline, LAST_INSTANT, MAX_DURATION_MS, parseDuration } from '../../src/domain/duration';

const NOW = Date.parse('2024-10-30T18:00:00.000Z');

describe('durations in range', () => {
  test('a duration past the years a timestamp can hold is refused where it is given, naming it', () => {
    expect(() => parseDuration(Number.MAX_SAFE_INTEGER, 'sleep "x"')).toThrow(RangeError);
    expect(() => parseDuration(Number.MAX_SAFE_INTEGER, 'sleep "x"')).toThrow(/^sleep "x" 9007199254740991 is too long: a duration may be at most 253,402,300,799,999 ms/);
    expect(() => parseDuration('9000y', 'waitForEvent "paid" timeout')).toThrow(/^waitForEvent "paid" timeout "9000y" is too long/);
    expect(parseDuration(MAX_DURATION_MS)).toBe(MAX_DURATION_MS);
    expect(parseDuration('100y')).toBe(100 * 365.25 * 86_400_000);
  });
});

describe('deadlines', () => {
  test('a deadline is now plus the duration', () => {
    expect(computeDeadline(NOW, 60_000, 'sleep "x"').toISOString()).toBe('2024-10-30T18:01:00.000Z');
    expect(computeDeadline(NOW, 0, 'sleep "x"').getTime()).toBe(NOW);
  });

  test('a deadline past 9999-12-31T23:59:59.999Z is a RangeError naming what', () => {
    const toLast = LAST_INSTANT.getTime() - NOW;
    expect(computeDeadline(NOW, toLast, 'sleep "x"').toISOString()).toBe('9999-12-31T23:59:59.999Z');
    expect(() => computeDeadline(NOW, toLast + 1, 'sleep "x"')).toThrow(RangeError);
    expect(() => computeDeadline(NOW, toLast + 1, 'sleep "x"')).toThrow(/^sleep "x" would end after 9999-12-31T23:59:59.999Z, the last instant a timestamp can hold$/);
    // Past what a Date can hold at all, too.
    expect(() => computeDeadline(NOW, Number.MAX_SAFE_INTEGER, 'sleep "x"')).toThrow(/would end after 9999/);
  });

  test('a duration that is not one is refused', () => {
    expect(() => computeDeadline(NOW, -1, 'sleep "x"')).toThrow(/^sleep "x" -1 is not a valid duration$/);
    expect(() => computeDeadline(NOW, Number.NaN, 'sleep "x"')).toThrow(RangeError);
  });
});
