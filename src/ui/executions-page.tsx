/** The executions list: filter by status and task, page through with offset/limit, refresh every 2 s. */
import type { ExecutionList, Task } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox } from './components';
import { ExecutionsTable } from './executions-table';
import { PAGE_SIZES, STATUSES, routeHref, withFilter, type ListFilter } from './routes';
import { usePolling } from './use-polling';

const REFRESH_MS = 2000;

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
  const list = usePolling<ExecutionList>(
    () => client.list({ status: filter.status, task: filter.task, parent_execution_id: filter.parent, limit: filter.limit, offset: filter.offset, order: 'desc' }),
    [client, filter.status, filter.task, filter.parent, filter.limit, filter.offset],
    { intervalMs: REFRESH_MS, enabled: autoRefresh },
  );
  useAuthPrompt(list.error, tasks.error);
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
        {list.data && <Pager list={list.data} filter={filter} />}
      </div>
      <ApiErrorBox error={list.error} />
      {!list.data && !list.error && <p class="muted">Loading…</p>}
      {list.data && (
        <ExecutionsTable items={list.data.executions} now={now} taskHref={(task) => routeHref(withFilter(filter, { task }))} testId="executions-table" />
      )}
    </div>
  );
}
