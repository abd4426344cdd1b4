/** A table of executions: the list page's, and a parent's children. */
import type { ExecutionSummary } from '../client';
import { Instant, Priority, StatusBadge, TagChips } from './components';
import { elapsedMs, formatDuration } from '../domain/format';
import { routeHref } from './routes';

/** `taskHref` and `tagHref` make tasks and tags links (the list filtered by them); plain text without. */
export function ExecutionsTable(props: {
  items: ExecutionSummary[];
  now: number;
  taskHref?: (task: string) => string;
  tagHref?: (tag: string) => string;
  testId?: string;
}) {
  const { items, now, taskHref, tagHref, testId } = props;
  return (
    <div class="table-scroll">
      <table class="executions" data-testid={testId}>
        <thead>
          <tr>
            <th>Execution</th>
            <th>Task</th>
            <th>Status</th>
            <th class="num" title="Higher is claimed first; 0 by default">Priority</th>
            <th>Tags</th>
            <th>Created</th>
            <th>Started</th>
            <th>Completed</th>
            <th class="num" title="From the first start to the end (or now), retry delays and waits included; an execution's page tells its run time from its waiting">
              Elapsed
            </th>
          </tr>
        </thead>
        <tbody>
          {items.length === 0 && (
            <tr>
              <td colSpan={9} class="muted">
                No executions match.
              </td>
            </tr>
          )}
          {items.map((e) => {
            const ran = elapsedMs(e.started_at, e.completed_at, now);
            return (
              <tr key={e.execution_id} data-execution-id={e.execution_id} data-status={e.status}>
                <td>
                  <a class="mono" href={routeHref({ page: 'execution', id: e.execution_id })}>
                    {e.execution_id}
                  </a>
                </td>
                <td>{taskHref ? <a href={taskHref(e.task)}>{e.task}</a> : e.task}</td>
                <td>
                  <StatusBadge status={e.status} />
                </td>
                <td class="num" data-testid="row-priority">
                  <Priority value={e.priority} />
                </td>
                <td class="wrap">
                  <TagChips tags={e.tags} href={tagHref} />
                </td>
                <td>
                  <Instant iso={e.created_at} now={now} relative />
                </td>
                <td>
                  <Instant iso={e.started_at} now={now} relative />
                </td>
                <td>
                  <Instant iso={e.completed_at} now={now} relative />
                </td>
                <td class="num">{ran === null ? '–' : formatDuration(ran)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
