import type Router from '@koa/router';
import { TaskNotFoundError } from '../errors';
import { getTask } from '../store/tasks';
import { countThroughput, THROUGHPUT_WINDOW_MINUTES } from '../store/throughput';
import type { ApiDeps } from './deps';
import type { ApiState } from './state';
import { addOperation } from './typed';

const BUCKET_SECONDS = 60 as const;

/** Read-only figures for dashboards: executions created, completed and failed per minute. */
export function addStatsRoutes(router: Router<ApiState>, deps: ApiDeps): void {
  addOperation(router, deps.routes, 'getThroughput', async ({ query }) => {
    const window = query.window ?? '1h';
    const minutes = THROUGHPUT_WINDOW_MINUTES[window];
    // Both at once: counting a task that turns out unknown reads an empty index range.
    const [task, buckets] = await Promise.all([query.task === undefined ? undefined : getTask(deps.db, query.task), countThroughput(deps.db, minutes, query.task)]);
    if (query.task !== undefined && !task) throw new TaskNotFoundError(query.task);
    const from = buckets[0].start;
    const to = new Date(buckets[buckets.length - 1].start.getTime() + BUCKET_SECONDS * 1000);
    return {
      status: 200,
      body: {
        window,
        task: query.task ?? null,
        bucket_seconds: BUCKET_SECONDS,
        from: from.toISOString(),
        to: to.toISOString(),
        buckets: buckets.map((b) => ({ start: b.start.toISOString(), created: b.created, completed: b.completed, failed: b.failed })),
      },
    };
  });
}
