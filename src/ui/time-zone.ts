/**
 * Pure: instants shown, and typed into datetime inputs, in the zone the operator chose: UTC, or the
 * browser's own. The browser's offset is passed in (`OffsetAt`), so tests need no particular TZ.
 */
import { formatInstant } from '../domain/format';

/** `utc` (the default) or `local`: the browser's time zone. */
export type TimeZoneChoice = 'utc' | 'local';
export const TIME_ZONE_CHOICES: readonly TimeZoneChoice[] = Object.freeze(['utc', 'local']);

/** Minutes east of UTC in a zone at the instant `ms`: at that instant, so daylight saving is right. */
export type OffsetAt = (ms: number) => number;

const MINUTE = 60_000;

/** The browser's offset at `ms`. */
export const browserOffsetAt: OffsetAt = (ms) => -new Date(ms).getTimezoneOffset();

export function isTimeZoneChoice(value: unknown): value is TimeZoneChoice {
  return (TIME_ZONE_CHOICES as readonly unknown[]).includes(value);
}

/** `UTC+05:30`, `UTC-04:00`, `UTC+00:00`: an offset as a suffix that cannot be mistaken for UTC mode. */
export function formatOffset(minutes: number): string {
  const sign = minutes < 0 ? '-' : '+';
  const v = Math.abs(minutes);
  return `UTC${sign}${String(Math.floor(v / 60)).padStart(2, '0')}:${String(v % 60).padStart(2, '0')}`;
}

function toMs(instant: string | number): number {
  return typeof instant === 'number' ? instant : Date.parse(instant);
}

/** `YYYY-MM-DD HH:mm:ss` of the wall clock `ms` reads as UTC. */
function wallClock(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
}

/**
 * An instant to the second: `2024-10-30 12:00:03 UTC`, or in the browser's zone with its offset,
 * `2024-10-30 17:30:03 UTC+05:30`; `–` for none.
 */
export function formatInstantIn(instant: string | number | null | undefined, zone: TimeZoneChoice, offsetAt: OffsetAt = browserOffsetAt): string {
  if (instant === null || instant === undefined || instant === '') return '–';
  const ms = toMs(instant);
  if (Number.isNaN(ms)) return String(instant);
  if (zone === 'utc') return formatInstant(new Date(ms).toISOString());
  const offset = offsetAt(ms);
  return `${wallClock(ms + offset * MINUTE)} ${formatOffset(offset)}`;
}

/**
 * The value a `datetime-local` input shows for `iso` in `zone`: `YYYY-MM-DDTHH:mm`, with seconds
 * only when the instant has some; '' for none.
 */
export function toDateTimeInput(iso: string | null | undefined, zone: TimeZoneChoice, offsetAt: OffsetAt = browserOffsetAt): string {
  const ms = iso ? Date.parse(iso) : NaN;
  if (Number.isNaN(ms)) return '';
  const shifted = new Date(zone === 'utc' ? ms : ms + offsetAt(ms) * MINUTE).toISOString();
  return shifted.slice(0, ms % MINUTE === 0 ? 16 : 19);
}

const DATE_TIME_INPUT = /^(\d{4,6})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/;

/**
 * The instant a `datetime-local` value means in `zone`, as ISO 8601 in UTC (`2024-10-30T12:00:00Z`); undefined when empty or
 * unreadable. A local wall time that a daylight-saving change makes occur twice, or skips, still
 * reads as an instant next to it: which of the two is not promised.
 */
export function fromDateTimeInput(value: string, zone: TimeZoneChoice, offsetAt: OffsetAt = browserOffsetAt): string | undefined {
  const m = DATE_TIME_INPUT.exec(value.trim());
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s = '0', frac = '0'] = m;
  const wall = new Date(0);
  // setUTCFullYear, not Date.UTC: Date.UTC reads the years 0-99 as 1900-1999.
  wall.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  wall.setUTCHours(Number(h), Number(mi), Number(s), Number(frac.padEnd(3, '0')));
  const wallMs = wall.getTime();
  if (Number.isNaN(wallMs)) return undefined;
  if (zone === 'utc') return toIso(wallMs);
  // The offset at the wall time read as UTC is a first guess; the offset at that guess is the answer
  // everywhere but inside a daylight-saving change, where no answer is right.
  const guess = wallMs - offsetAt(wallMs) * MINUTE;
  return toIso(wallMs - offsetAt(guess) * MINUTE);
}

/** ISO 8601 in UTC, without milliseconds when there are none: `2024-10-30T12:00:00Z`. */
function toIso(ms: number): string {
  return new Date(ms).toISOString().replace('.000Z', 'Z');
}
