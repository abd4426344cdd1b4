/** Pure: the dashboard's pages as hash routes (`#/executions?status=waiting`), parsed and written back. */
import type { ExecutionStatus, ListFilter as ListQuery } from '../client';
import { STATUSES } from './statuses';

export const PAGE_SIZES = Object.freeze([20, 50, 100]);

/** The contract's bounds on the `tag` filter: 1-64 characters each, at most 20. */
const TAG_MAX_LENGTH = 64;
const TAGS_MAX = 20;
const EXECUTION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface ListFilter {
  status?: ExecutionStatus;
  task?: string;
  /** Only the children of this execution. */
  parent?: string;
  /** Executions that carry every one of these tags; undefined rather than empty. */
  tags?: string[];
  /** The one execution scheduled with this idempotency key. */
  idempotencyKey?: string;
  /** Created at or after this instant (ISO 8601, UTC). */
  createdAfter?: string;
  /** Created before this instant (ISO 8601, UTC). */
  createdBefore?: string;
  offset: number;
  limit: number;
}

export type Route =
  | { page: 'executions'; filter: ListFilter }
  | { page: 'execution'; id: string }
  | { page: 'tasks' }
  | { page: 'workers' }
  /** The webhooks, with the deliveries of the one whose id is given. */
  | { page: 'webhooks'; id?: string };

function isStatus(value: string | null): value is ExecutionStatus {
  return value !== null && (STATUSES as readonly string[]).includes(value);
}

function toCount(value: string | null, fallback: number, min: number, max: number): number {
  const n = value === null ? NaN : Number(value);
  return Number.isInteger(n) ? Math.min(max, Math.max(min, n)) : fallback;
}

/** An instant as the URL keeps it (`2024-10-30T12:00:00Z`), or undefined for anything unreadable. */
function toInstant(value: string | null): string | undefined {
  const ms = value ? Date.parse(value) : NaN;
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString().replace('.000Z', 'Z');
}

/**
 * Tags as an operator types them: comma-separated, in one value or several. Blanks and repeats are
 * dropped, as are tags the contract would refuse (over 64 characters, past the 20th), so a hand-edited
 * URL filters by what it can rather than failing. A tag that itself holds a comma cannot be asked for.
 */
export function parseTags(values: readonly string[]): string[] | undefined {
  const tags = [...new Set(values.flatMap((v) => v.split(',')).map((t) => t.trim()))].filter((t) => t.length > 0 && t.length <= TAG_MAX_LENGTH);
  return tags.length > 0 ? tags.slice(0, TAGS_MAX) : undefined;
}

/** True when `text` has the shape of an execution id (a UUID): the search box then looks it up first. */
export function looksLikeExecutionId(text: string): boolean {
  return EXECUTION_ID.test(text.trim());
}

/** The route `hash` (with or without its `#`) names; anything unknown is the executions list. */
export function parseRoute(hash: string): Route {
  const raw = hash.replace(/^#/, '');
  const [path, query = ''] = raw.split('?', 2);
  const params = new URLSearchParams(query);
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'executions' && parts[1]) return { page: 'execution', id: parts[1] };
  if (parts[0] === 'tasks') return { page: 'tasks' };
  if (parts[0] === 'workers') return { page: 'workers' };
  if (parts[0] === 'webhooks') return parts[1] ? { page: 'webhooks', id: parts[1] } : { page: 'webhooks' };
  const status = params.get('status');
  return {
    page: 'executions',
    filter: {
      status: isStatus(status) ? status : undefined,
      task: params.get('task') || undefined,
      parent: params.get('parent') || undefined,
      tags: parseTags(params.getAll('tag')),
      idempotencyKey: params.get('idempotency_key') || undefined,
      createdAfter: toInstant(params.get('created_after')),
      createdBefore: toInstant(params.get('created_before')),
      offset: toCount(params.get('offset'), 0, 0, Number.MAX_SAFE_INTEGER),
      limit: toCount(params.get('limit'), PAGE_SIZES[0], 1, 500),
    },
  };
}

/** The hash (`#/...`) for `route`; defaults are left out so links stay short. */
export function routeHref(route: Route): string {
  switch (route.page) {
    case 'execution':
      return `#/executions/${encodeURIComponent(route.id)}`;
    case 'tasks':
      return '#/tasks';
    case 'workers':
      return '#/workers';
    case 'webhooks':
      return route.id ? `#/webhooks/${encodeURIComponent(route.id)}` : '#/webhooks';
    case 'executions': {
      const params = new URLSearchParams();
      const f = route.filter;
      if (f.status) params.set('status', f.status);
      if (f.task) params.set('task', f.task);
      if (f.parent) params.set('parent', f.parent);
      for (const tag of f.tags ?? []) params.append('tag', tag);
      if (f.idempotencyKey) params.set('idempotency_key', f.idempotencyKey);
      if (f.createdAfter) params.set('created_after', f.createdAfter);
      if (f.createdBefore) params.set('created_before', f.createdBefore);
      if (f.offset > 0) params.set('offset', String(f.offset));
      if (f.limit !== PAGE_SIZES[0]) params.set('limit', String(f.limit));
      const q = params.toString();
      return q ? `#/executions?${q}` : '#/executions';
    }
  }
}

/** The list filtered by `changes`, back on the first page unless `changes` sets an offset. */
export function withFilter(filter: ListFilter, changes: Partial<ListFilter>): Route {
  return { page: 'executions', filter: { ...filter, offset: 0, ...changes } };
}

/** Whether anything narrows the list beyond paging. */
export function isFiltered(f: ListFilter): boolean {
  return Boolean(f.status || f.task || f.parent || f.tags || f.idempotencyKey || f.createdAfter || f.createdBefore);
}

/** The list request for `filter`, newest first: the page's query, and the bulk actions' counts. */
export function toListQuery(f: ListFilter): ListQuery {
  return {
    status: f.status,
    task: f.task,
    parent_execution_id: f.parent,
    tag: f.tags,
    idempotency_key: f.idempotencyKey,
    created_after: f.createdAfter,
    created_before: f.createdBefore,
    limit: f.limit,
    offset: f.offset,
    order: 'desc',
  };
}
