/**
 * Plain-text layout for the operator commands: aligned tables, label/value blocks, cells cut to a
 * width. No dependency: the few rules a terminal table needs fit here, and a library would bring
 * colours, borders and wrapping that scripts (which use --json) and pipes do not want.
 */
import { formatDuration, formatInstant, formatRelative } from '../domain/format';

export { formatDuration, formatRelative };

/** One column of a table: its header and how its cells are laid out. */
export interface Column {
  header: string;
  /** Numbers read best right-aligned. */
  align?: 'left' | 'right';
  /** Cells longer than this many characters are cut and end in `…`. */
  max?: number;
}

const ELLIPSIS = '…';
const GAP = '  ';

/**
 * Text from the server (task names, error messages, payloads) made safe for one terminal line:
 * line breaks and tabs become spaces, other control characters (escape sequences could move the
 * cursor or retitle the terminal) are shown as `\u001b`-style escapes.
 */
export function sanitize(text: string): string {
  return text
    .replace(/[\r\n\t]+/g, ' ')
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Code points, so that a cut never splits a surrogate pair and widths count characters. */
function chars(text: string): string[] {
  return Array.from(text);
}

/** `text` cut to at most `max` characters, ending in `…` when it was longer. */
export function truncate(text: string, max: number): string {
  const cs = chars(text);
  return cs.length <= max ? text : cs.slice(0, Math.max(0, max - 1)).join('') + ELLIPSIS;
}

function pad(text: string, width: number, align: 'left' | 'right'): string {
  const fill = ' '.repeat(Math.max(0, width - chars(text).length));
  return align === 'right' ? fill + text : text + fill;
}

/** Rows under upper-case headers, columns two spaces apart, no trailing spaces. */
export function renderTable(columns: readonly Column[], rows: readonly (readonly string[])[]): string {
  const cells = rows.map((row) => columns.map((col, i) => {
    const text = sanitize(row[i] ?? '');
    return col.max === undefined ? text : truncate(text, col.max);
  }));
  const headers = columns.map((c) => c.header.toUpperCase());
  const widths = columns.map((_, i) => Math.max(chars(headers[i]).length, ...cells.map((r) => chars(r[i]).length)));
  const line = (row: string[]) => row.map((text, i) => pad(text, widths[i], columns[i].align ?? 'left')).join(GAP).trimEnd();
  return [line(headers), ...cells.map(line)].join('\n') + '\n';
}

/** `label  value` lines with the values aligned; values are sanitized and cut to `max` characters. */
export function renderFields(fields: readonly (readonly [string, string])[], max = 160): string {
  const width = Math.max(...fields.map(([label]) => label.length));
  return fields.map(([label, value]) => `${label.padEnd(width)}${GAP}${truncate(sanitize(value), max)}`.trimEnd()).join('\n') + '\n';
}

/** An ISO instant as `2024-10-30 12:00:03` (UTC, which the table header says) or `–`. */
export function formatUtc(iso: string | null | undefined): string {
  return formatInstant(iso).replace(/ UTC$/, '');
}

/** An instant with how long ago (or how far ahead) it is: `2024-10-30 12:00:03 UTC (4.2 s ago)`. */
export function formatWhen(iso: string | null | undefined, nowMs = Date.now()): string {
  if (!iso) return formatInstant(iso);
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? iso : `${formatInstant(iso)} (${formatRelative(ms, nowMs)})`;
}

/** The time between two instants (`1.2 s`), the second defaulting to now; `–` without a start. */
export function formatSpan(fromIso: string | null | undefined, toIso: string | null | undefined, nowMs = Date.now()): string {
  if (!fromIso) return '–';
  const to = toIso ? Date.parse(toIso) : nowMs;
  return formatDuration(Math.max(0, to - Date.parse(fromIso)));
}

/** Any JSON value on one line (absent reads as null). */
export function compactJson(value: unknown): string {
  return JSON.stringify(value === undefined ? null : value);
}
