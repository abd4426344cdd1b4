/**
 * The executions list: filter by status, task, tags, creation time or idempotency key, find one by id,
 * page through with offset/limit, act on every match at once. Reloads when an execution of the page's
 * task changes status (one changes stream for the whole page, never one per row: browsers allow a
 * handful of connections per host), and every 10 s for what no status change announces (new ones).
 */
import type { ExecutionList, Task } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { BulkActions } from './bulk-actions';
import { ApiErrorBox } from './components';
import { ExecutionsTable } from './executions-table';
import { ListFilters } from './list-filters';
import { PAGE_SIZES, isFiltered, routeHref, toListQuery, withFilter, type ListFilter } from './routes';
import { STATUSES } from './statuses';
import { ThroughputChart } from './throughput-chart';
import { usePolling } from './use-polling';
import { useStream, useThrottledReload } from './use-stream';

/** For executions no change announces: new ones, scheduled ones becoming due. */
const REFRESH_MS = 10_000;
/** The most often a burst of changes reloads the page. */
const RELOAD_MIN_MS = 500;

function Pager({ list, filter }: { list: ExecutionList; filter: ListFilter }) {
  const { navigate } = useApi();
  const first = list.total === 0 ? 0 : list.offset + 1;
  const last = list.offset + list.executions.length;
  const prev = Math.max(0, list.offset - list.limit);
  return (
    <div class="pager">
      <span data-testid="page-info">
        {first}–{last} of {list.total}
      </span>
      <button type="button" disabled={list.offset === 0} onClick={() => navigate(routeHref(withFilter(filter, { offset: prev })))}>
        ‹ Newer
      </button>
      <button
        type="button"
        disabled={last >= list.total}
        onClick={() => navigate(routeHref(withFilter(filter, { offset: list.offset + list.limit })))}
      >
        Older ›
      </button>
      <label>
        Page size{' '}
        <select value={String(filter.limit)} onChange={(e) => navigate(routeHref(withFilter(filter, { limit: Number(e.currentTarget.value) })))}>
          {PAGE_SIZES.map((n) => (
            <option key={n} value={String(n)}>
              {n}
            </option>
          ))}
        </select>
      </label>
    </div>
  );
}

export function ExecutionsPage({ filter }: { filter: ListFilter }) {
  const api = useApi();
  const { client, autoRefresh, navigate } = api;
  const tasks = usePolling<Task[]>(() => client.listTasks(), [client], { intervalMs: 30_000, enabled: autoRefresh });
  // Every dependency a primitive: the route is parsed anew on each render, its tags a new array each time.
  const list = usePolling<ExecutionList>(
    () => client.list(toListQuery(filter)),
    [client, routeHref({ page: 'executions', filter })],
    { intervalMs: REFRESH_MS, enabled: autoRefresh },
  );
  const reloadSoon = useThrottledReload(list.reload, RELOAD_MIN_MS);
  // Every change and every sync (a (re)connection, changes missed) reloads the page, throttled.
  const changes = useStream((signal) => client.watchChanges({ task: filter.task, signal }), reloadSoon, [client, filter.task], autoRefresh);
  useAuthPrompt(list.error, tasks.error, changes.error);
  const now = Date.now();
  const taskNames = [...new Set([...(tasks.data ?? []).map((t) => t.name), ...(filter.task ? [filter.task] : [])])].sort();
  return (
    <div>
      <div class="toolbar">
        <h1>Executions</h1>
        <label>
          Status{' '}
          <select
            data-testid="filter-status"
            value={filter.status ?? ''}
            onChange={(e) => navigate(routeHref(withFilter(filter, { status: (e.currentTarget.value || undefined) as ListFilter['status'] })))}
          >
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Task{' '}
          <select
            data-testid="filter-task"
            value={filter.task ?? ''}
            onChange={(e) => navigate(routeHref(withFilter(filter, { task: e.currentTarget.value || undefined })))}
          >
            <option value="">any</option>
            {taskNames.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
        {filter.parent && (
          <span class="chip" data-testid="filter-parent">
            children of{' '}
            <a class="mono" href={routeHref({ page: 'execution', id: filter.parent })}>
              {filter.parent}
            </a>{' '}
            <a href={routeHref(withFilter(filter, { parent: undefined }))} title="Show all executions">
              ✕
            </a>
          </span>
        )}
        {isFiltered(filter) && (
          <a href={routeHref({ page: 'executions', filter: { offset: 0, limit: filter.limit } })} data-testid="clear-filters">
            Clear filters
          </a>
        )}
        {list.data && <Pager list={list.data} filter={filter} />}
      </div>
      <ListFilters filter={filter} />
      <section class="card chart-card">
        <ThroughputChart task={filter.task} />
      </section>
      <BulkActions key={routeHref({ page: 'executions', filter: { ...filter, offset: 0, limit: PAGE_SIZES[0] } })} filter={filter} onDone={list.reload} />
      <ApiErrorBox error={list.error} />
      {!list.data && !list.error && <p class="muted">Loading…</p>}
      {list.data && (
        <ExecutionsTable
          items={list.data.executions}
          now={now}
          taskHref={(task) => routeHref(withFilter(filter, { task }))}
          tagHref={(tag) => routeHref(withFilter(filter, { tags: [...new Set([...(filter.tags ?? []), tag])] }))}
          testId="executions-table"
        />
      )}
    </div>
  );
}
