/** Pure formatting for people, shared by the dashboard and the command line: durations, instants, relative times and JSON. No DOM. */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/**
 * A duration as an operator reads it: `350 ms`, `4.2 s`, `42 s`, `3m 05s`, `2h 03m`, `3d 04h`.
 * Two units at most, because a timeline row has little room and more precision says nothing.
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return '–';
  const sign = ms < 0 ? '-' : '';
  const v = Math.abs(ms);
  if (v < SECOND) return `${sign}${Math.round(v)} ms`;
  if (v < 10 * SECOND) return `${sign}${(Math.floor(v / 100) / 10).toFixed(1)} s`;
  if (v < MINUTE) return `${sign}${Math.floor(v / SECOND)} s`;
  const pad = (n: number) => String(n).padStart(2, '0');
  if (v < HOUR) return `${sign}${Math.floor(v / MINUTE)}m ${pad(Math.floor((v % MINUTE) / SECOND))}s`;
  if (v < DAY) return `${sign}${Math.floor(v / HOUR)}h ${pad(Math.floor((v % HOUR) / MINUTE))}m`;
  return `${sign}${Math.floor(v / DAY)}d ${pad(Math.floor((v % DAY) / HOUR))}h`;
}

/** `in 4.0 s`, `3m 05s ago` or `now` (within half a second), from `nowMs`. */
export function formatRelative(targetMs: number, nowMs: number): string {
  const delta = targetMs - nowMs;
  if (Math.abs(delta) < 500) return 'now';
  return delta > 0 ? `in ${formatDuration(delta)}` : `${formatDuration(-delta)} ago`;
}

/** An ISO instant shown in UTC to the second, `2024-10-30 12:00:03 UTC`; `–` for null. */
export function formatInstant(iso: string | null | undefined): string {
  if (!iso) return '–';
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  return `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** Milliseconds between two ISO instants, the second defaulting to `nowMs`; null when the first is missing. */
export function elapsedMs(fromIso: string | null | undefined, toIso: string | null | undefined, nowMs: number): number | null {
  if (!fromIso) return null;
  const to = toIso ? Date.parse(toIso) : nowMs;
  return Math.max(0, to - Date.parse(fromIso));
}

/** Pretty JSON for display; `undefined` (absent) reads as null. */
export function formatJson(value: unknown): string {
  return JSON.stringify(value === undefined ? null : value, null, 2);
}

/** A one-line preview of a JSON value, cut to `max` characters. */
export function previewJson(value: unknown, max = 80): string {
  const text = JSON.stringify(value === undefined ? null : value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
