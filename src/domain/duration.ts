import ms from 'ms';

/** A duration as milliseconds or an `ms` string such as '10s', '5m', '7d'. */
export type Duration = number | string;

/** Parses a duration into milliseconds; throws a RangeError on anything that is not one. */
export function parseDuration(value: Duration, what = 'duration'): number {
  const result = typeof value === 'number' ? value : ms(value as ms.StringValue);
  if (typeof result !== 'number' || !Number.isFinite(result) || result < 0) {
    throw new RangeError(`${what} ${JSON.stringify(value)} is not a valid duration`);
  }
  return Math.round(result);
}
