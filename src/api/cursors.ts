import { InvalidDataError } from '../errors';
import type { ListPosition } from '../store/executions';

/**
 * The opaque cursors of keyset paging: base64url JSON that a client hands back unread. A list's
 * cursor holds the order it was made for and the position of a page's last execution; a bulk
 * action's holds the position it reached, the instant its first batch began (executions created
 * after that are not the action's) and how many it took. Each is checked field by field when it
 * comes back: it is input.
 */

/** An instant to the microsecond in UTC, as ListPosition holds it. */
const MICRO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const encode = (value: unknown): string => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');

/** The cursor's JSON object, or undefined when it is not one this server could have made. */
function decode(cursor: string): Record<string, unknown> | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function positionOf(value: Record<string, unknown>): ListPosition | undefined {
  const { t, i } = value;
  return typeof t === 'string' && MICRO_INSTANT.test(t) && typeof i === 'string' && UUID.test(i) ? { createdAt: t, id: i } : undefined;
}

const badCursor = (path: string, why: string) => new InvalidDataError('request is invalid', [{ path, message: why }]);

/** The `next_cursor` of a list page whose last execution stands at `position`. */
export function listCursor(order: 'asc' | 'desc', position: ListPosition): string {
  return encode({ o: order, t: position.createdAt, i: position.id });
}

/** The position a list's `cursor` continues after; a cursor not made by listCursor, or for the other order, is invalid data. */
export function readListCursor(cursor: string, order: 'asc' | 'desc'): ListPosition {
  const value = decode(cursor);
  const position = value && positionOf(value);
  if (!value || !position || (value.o !== 'asc' && value.o !== 'desc')) throw badCursor('query/cursor', "must be a page's next_cursor, as this server gave it out");
  if (value.o !== order) throw badCursor('query/cursor', `was made for order=${String(value.o)}: send order=${String(value.o)} with it`);
  return position;
}

/** Where a bulk action stopped, the instant its first batch began, and how many executions it took so far. */
export interface BulkProgress {
  after: ListPosition;
  /** Only executions created before this instant (microseconds, UTC) are the action's. */
  until: string;
  /** Executions the action took in its earlier requests: its `limit` counts them. */
  taken: number;
}

/** The `next_cursor` of a bulk action that stopped at `progress`. */
export function bulkCursor(progress: BulkProgress): string {
  return encode({ t: progress.after.createdAt, i: progress.after.id, u: progress.until, n: progress.taken });
}

/** Where a bulk action's `cursor` continues; one not made by bulkCursor is invalid data. */
export function readBulkCursor(cursor: string): BulkProgress {
  const value = decode(cursor);
  const after = value && positionOf(value);
  const { u, n } = value ?? {};
  if (!after || typeof u !== 'string' || !MICRO_INSTANT.test(u) || typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
    throw badCursor('body/cursor', "must be a bulk action's next_cursor, as this server gave it out");
  }
  return { after, until: u, taken: n };
}
