import type Router from '@koa/router';
import { ExecutionNotFoundError, NotWaitingForEventError, TaskNotRegisteredError } from '../errors';
import { deliverEvent, getExecution } from '../store/executions';
import type { ApiDeps } from './deps';
import type { ApiState } from './state';
import { addOperation } from './typed';

/** Event delivery to waiting executions. */
export function addEventRoutes(router: Router<ApiState>, deps: ApiDeps): void {
  const { db, taskSchemas } = deps;
  addOperation(router, deps.routes, 'sendEvent', async ({ params, body }) => {
    const payload = body === undefined ? null : body;
    // Learn the task (it never changes) and load its validators before the transaction, so the
    // row lock is never held while another pool connection is awaited.
    const execution = await getExecution(db, params.id);
    if (!execution) throw new ExecutionNotFoundError(params.id);
    const task = await taskSchemas.getTask(execution.task).catch((err: unknown) => {
      if (err instanceof TaskNotRegisteredError) return undefined;
      throw err;
    });
    const outcome = await deliverEvent(db, params.id, params.event_name, payload, () => {
      // A task no longer registered has no schema to check against: any payload is accepted.
      if (task) taskSchemas.assertValidEvent(task, params.event_name, payload);
    });
    switch (outcome.kind) {
      case 'delivered':
        return { status: 200, body: { execution_id: outcome.execution.id, event_name: params.event_name, status: outcome.execution.status } };
      case 'not_waiting':
        throw new NotWaitingForEventError(params.id, params.event_name);
      case 'not_found':
        throw new ExecutionNotFoundError(params.id);
    }
  });
}
