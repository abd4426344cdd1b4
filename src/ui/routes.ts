/** Pure: the dashboard's pages as hash routes (`#/executions?status=waiting`), parsed and written back. */
import type { ExecutionStatus } from '../client';

export const STATUSES: readonly ExecutionStatus[] = Object.freeze(['pending', 'running', 'waiting', 'completed', 'failed', 'cancelled']);
export const PAGE_SIZES = Object.freeze([20, 50, 100]);

export interface ListFilter {
  status?: ExecutionStatus;
  task?: string;
  /** Only the children of this execution. */
  parent?: string;
  offset: number;
  limit: number;
}

export type Route =
  | { page: 'executions'; filter: ListFilter }
  | { page: 'execution'; id: string }
  | { page: 'tasks' }
  | { page: 'workers' };

function isStatus(value: string | null): value is ExecutionStatus {
  return value !== null && (STATUSES as readonly string[]).includes(value);
}

function toCount(value: string | null, fallback: number, min: number, max: number): number {
  const n = value === null ? NaN : Number(value);
  return Number.isInteger(n) ? Math.min(max, Math.max(min, n)) : fallback;
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
  const status = params.get('status');
  const task = params.get('task');
  const parent = params.get('parent');
  return {
    page: 'executions',
    filter: {
      status: isStatus(status) ? status : undefined,
      task: task || undefined,
      parent: parent || undefined,
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
    case 'executions': {
      const params = new URLSearchParams();
      const f = route.filter;
      if (f.status) params.set('status', f.status);
      if (f.task) params.set('task', f.task);
      if (f.parent) params.set('parent', f.parent);
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
