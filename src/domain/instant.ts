import { fullFormats } from 'ajv-formats/dist/formats';

/**
 * Reads an RFC 3339 date-time that the contract's schema has already accepted (`format: date-time`),
 * as a Date. JavaScript's parser refuses a leap second (`23:59:60`), which RFC 3339 allows; it is read
 * as the start of the next second, as PostgreSQL reads it. Short offsets are written out first. Undefined when the instant falls outside
 * the years 0001-9999 in UTC (`0000-01-01T00:00:00+01:00` does), which the contract's timestamps,
 * four-digit years in UTC, could not write back.
 */
export function parseInstant(text: string): Date | undefined {
  // The schema takes offsets without minutes or colon (`+01`, `+0100`); JavaScript only `+01:00`.
  const zoned = text.replace(/([+-]\d\d):?(\d\d)?$/, (_, hours: string, minutes?: string) => `${hours}:${minutes ?? '00'}`);
  const leap = /^(.*[Tt ]\d\d:\d\d:)60(.*)$/.exec(zoned);
  const ms = leap ? Date.parse(`${leap[1]}59${leap[2]}`) + 1000 : Date.parse(zoned);
  if (Number.isNaN(ms)) return undefined;
  const instant = new Date(ms);
  const year = instant.getUTCFullYear();
  return year >= 1 && year <= 9999 ? instant : undefined;
}

const DATE_TIME = fullFormats['date-time'] as { validate: (text: string) => boolean };

/**
 * An instant given in code (a Date, or RFC 3339 text with a time zone), as the API takes `start_at`:
 * text must pass the same `format: date-time` check as the contract's (ajv-formats, full mode: real
 * calendar dates, a leap second only at 23:59:60 UTC). Undefined for anything else, such as an invalid
 * Date, text without a zone, or a year outside 0001-9999.
 */
export function toInstant(value: Date | string): Date | undefined {
  if (value instanceof Date) {
    const year = value.getUTCFullYear();
    return Number.isNaN(value.getTime()) || year < 1 || year > 9999 ? undefined : value;
  }
  return typeof value === 'string' && DATE_TIME.validate(value) ? parseInstant(value) : undefined;
}
