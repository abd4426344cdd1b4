/**
 * Parsers for the operator commands' option values. Each throws commander's InvalidArgumentError,
 * which ends the command with one usage line (exit 2) before anything is sent.
 */
import { InvalidArgumentError } from 'commander';
import { toInstant } from '../domain/instant';

/** An integer of at least `minimum`, such as --limit or --offset. */
export function parseCount(minimum: number, maximum = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < minimum || n > maximum) {
      const range = maximum < Number.MAX_SAFE_INTEGER ? `from ${minimum} to ${maximum}` : `${minimum} or more`;
      throw new InvalidArgumentError(`must be an integer, ${range}`);
    }
    return n;
  };
}

/** A priority: a whole number from -1,000,000 to 1,000,000 (--priority). */
export function parsePriority(value: string): number {
  const n = Number(value);
  if (!/^-?\d+$/.test(value.trim()) || Math.abs(n) > 1_000_000) throw new InvalidArgumentError('must be an integer from -1000000 to 1000000');
  return n;
}

/** A number of seconds, 0 or more, such as --timeout. */
export function parseSeconds(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError('must be a number of seconds, 0 or more');
  return n;
}

/**
 * An ISO 8601 instant with a time zone, checked as the contract checks `format: date-time`, and
 * written back in UTC: a `+01:00` offset then needs no escaping in a query string.
 */
export function parseInstantOption(value: string): string {
  const instant = toInstant(value);
  if (!instant) throw new InvalidArgumentError('must be an ISO 8601 instant with a time zone, such as 2024-10-30T00:00:00Z');
  return instant.toISOString();
}

/** A repeatable option (`--tag eu --tag vip`): every value given, in order. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}
