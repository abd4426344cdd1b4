import type Router from '@koa/router';
import { TaskNotFoundError } from '../errors';
import { countExecutionsByTaskAndStatus } from '../store/execution-counts';
import { countKeys, listTasks, setTaskPaused } from '../store/tasks';
import { countVersions } from '../store/versions';
import { countLiveWorkersByTask } from '../store/workers';
import type { ApiDeps } from './deps';
import { operatorMetrics } from './metrics';
import { toTask } from './representations';
import type { ApiState } from './state';
import { addOperation } from './typed';

/** The task registry, for dashboards: counts by status, the live workers and the versions of each task; pause and resume. */
export function addTaskRoutes(router: Router<ApiState>, deps: ApiDeps): void {
  addOperation(router, deps.routes, 'listTasks', async () => {
    // Exact, from the maintained counts (migration 018): as cheap at ten million executions as at ten.
    const [tasks, counts, workers, versions] = await Promise.all([
      listTasks(deps.db),
      countExecutionsByTaskAndStatus(deps.db),
      countLiveWorkersByTask(deps.db),
      countVersions(deps.db),
    ]);
    const byTask = new Map<string, Map<string, number>>();
    for (const c of counts) {
      if (!byTask.has(c.task)) byTask.set(c.task, new Map());
      byTask.get(c.task)?.set(c.status, c.count);
    }
    const keys = await Promise.all(tasks.map((t) => countKeys(deps.db, t)));
    const versionsOf = (task: string) => versions.filter((v) => v.task === task);
    return { status: 200, body: { items: tasks.map((t, i) => toTask(t, byTask.get(t.name) ?? new Map(), workers.get(t.name) ?? 0, keys[i], versionsOf(t.name))) } };
  });

  const metrics = operatorMetrics(deps.registry);
  for (const [operationId, paused] of [['pauseTask', true], ['resumeTask', false]] as const) {
    addOperation(router, deps.routes, operationId, async ({ params }) => {
      const task = await setTaskPaused(deps.db, params.name, paused);
      if (!task) throw new TaskNotFoundError(params.name);
      metrics.paused(paused);
      return { status: 200, body: { name: task.name, paused: task.paused } };
    });
  }
}
