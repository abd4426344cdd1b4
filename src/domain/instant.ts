/**
 * Reads an RFC 3339 date-time that the contract's schema has already accepted (`format: date-time`),
 * as a Date. JavaScript's parser refuses a leap second (`23:59:60`), which RFC 3339 allows; it is read
 * as the start of the next second, as PostgreSQL reads it. Undefined when the instant falls outside
 * the years 0001-9999 in UTC (`0000-01-01T00:00:00+01:00` does), which the contract's timestamps,
 * four-digit years in UTC, could not write back.
 */
export function parseInstant(text: string): Date | undefined {
  const leap = /^(.*[Tt ]\d\d:\d\d:)60(.*)$/.exec(text);
  const ms = leap ? Date.parse(`${leap[1]}59${leap[2]}`) + 1000 : Date.parse(text);
  if (Number.isNaN(ms)) return undefined;
  const instant = new Date(ms);
  const year = instant.getUTCFullYear();
  return year >= 1 && year <= 9999 ? instant : undefined;
}
