import type Router from '@koa/router';
import { listWorkers } from '../store/workers';
import type { ApiDeps } from './deps';
import { toWorker } from './representations';
import type { ApiState } from './state';
import { addOperation } from './typed';

/** The worker registry, for operators: who serves which task, and who stopped answering. */
export function addWorkerRoutes(router: Router<ApiState>, deps: ApiDeps): void {
  addOperation(router, deps.routes, 'listWorkers', async () => {
    const workers = await listWorkers(deps.db);
    return { status: 200, body: { workers: workers.map(toWorker) } };
  });
}
