import ms from 'ms';
import { toInstant } from './instant';

/** A duration as milliseconds or an `ms` string such as '10s', '5m', '7d'. */
export type Duration = number | string;

/** The last instant the contract's timestamps (four-digit years, UTC) can write. */
export const LAST_INSTANT = new Date('9999-12-31T23:59:59.999Z');

/**
 * The longest duration: from the epoch to LAST_INSTANT, about 8,030 years. Any longer one ends past
 * LAST_INSTANT from any start since 1970, so it is refused where it is given, not when it ends.
 */
export const MAX_DURATION_MS = LAST_INSTANT.getTime();

/** Parses a duration into milliseconds; throws a RangeError on anything that is not one, or longer than MAX_DURATION_MS. */
export function parseDuration(value: Duration, what = 'duration'): number {
  const result = typeof value === 'number' ? value : ms(value as ms.StringValue);
  if (typeof result !== 'number' || !Number.isFinite(result) || result < 0) {
    throw new RangeError(`${what} ${JSON.stringify(value)} is not a valid duration`);
  }
  if (result > MAX_DURATION_MS) {
    throw new RangeError(`${what} ${JSON.stringify(value)} is too long: a duration may be at most ${MAX_DURATION_MS.toLocaleString('en-US')} ms (until ${LAST_INSTANT.toISOString()} from 1970)`);
  }
  return Math.round(result);
}

/**
 * The instant `durationMs` after `nowMs`. Throws a RangeError naming `what` when it is past
 * LAST_INSTANT: stored, it would be a timestamp the API cannot write.
 */
export function computeDeadline(nowMs: number, durationMs: number, what: string): Date {
  if (!Number.isFinite(durationMs) || durationMs < 0) throw new RangeError(`${what} ${durationMs} is not a valid duration`);
  const deadline = toInstant(new Date(nowMs + durationMs));
  if (deadline === undefined) {
    throw new RangeError(`${what} would end after ${LAST_INSTANT.toISOString()}, the last instant a timestamp can hold`);
  }
  return deadline;
}
