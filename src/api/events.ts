import type Router from '@koa/router';
import { AppError, ExecutionNotFoundError, NotWaitingForEventError, TaskNotRegisteredError, type EventWaitState } from '../errors';
import { deliverEvent, deliverEventOnce, findKeyedDelivery, getExecution } from '../store/executions';
import type { ExecutionRecord } from '../store/rows';
import type { ApiDeps } from './deps';
import type { ApiState } from './state';
import { toValidEvent } from './task-checks';
import { addOperation, type HandlerResult } from './typed';

/**
 * What the execution was doing, for a 409: its status and the other events it waits for (each once).
 * Never `eventName` itself: a wait for it that shows open has just been found timed out or taken.
 */
function toWaitState(execution: ExecutionRecord, eventName: string): EventWaitState {
  const open = execution.status === 'waiting' ? (execution.openWaits ?? []) : [];
  return { status: execution.status, waitingFor: [...new Set(open.map((w) => w.eventName).filter((n) => n !== eventName))] };
}

/** Event delivery to waiting executions. */
export function addEventRoutes(router: Router<ApiState>, deps: ApiDeps): void {
  const { db, taskSchemas } = deps;
  addOperation(router, deps.routes, 'sendEvent', async ({ params, headers, body, ctx }) => {
    const payload = body === undefined ? null : body;
    const key = headers['idempotency-key'];
    // A repeat of a delivery that was made answers as it did, whatever the execution does now.
    if (key !== undefined) {
      const made = await findKeyedDelivery(db, params.id, params.event_name, key);
      if (made) return { status: 200, body: made };
    }
    // The checks in the contract's order: the execution exists, waits for this event, and the payload
    // fits the event's schema (an execution's task never changes); then one conditional statement
    // delivers it, and a delivery that lost a race finds nothing to deliver.
    const execution = await getExecution(db, params.id);
    if (!execution) throw new ExecutionNotFoundError(params.id);

    const deliver = async (execution: ExecutionRecord): Promise<HandlerResult<'sendEvent'>> => {
      // Not waiting: unless a concurrent delivery with the same key made it so (then its answer is ours).
      // `seen` is the execution as read before; a delivery that lost a race (the wait was taken or timed
      // out between the read and the statement) reads it again.
      const notWaiting = async (seen?: ExecutionRecord) => {
        const made = key === undefined ? undefined : await findKeyedDelivery(db, params.id, params.event_name, key);
        if (made) return { status: 200 as const, body: made };
        throw await notWaitingError(seen);
      };
      const notWaitingError = async (seen?: ExecutionRecord) => {
        const now = seen ?? (await getExecution(db, params.id));
        if (!now) return new ExecutionNotFoundError(params.id);
        return new NotWaitingForEventError(params.id, params.event_name, { ...toWaitState(now, params.event_name), missed: seen === undefined });
      };
      if (execution.status !== 'waiting' || !execution.openWaits?.some((w) => w.eventName === params.event_name)) return notWaiting(execution);
      const task = await taskSchemas.getTask(execution.task).catch((err: unknown) => {
        if (err instanceof TaskNotRegisteredError) return undefined;
        throw err;
      });
      const stored = toValidEvent(task, params.event_name, payload, deps.config.limits.valueBytes);
      if (key !== undefined) {
        const keyed = await deliverEventOnce(db, params.id, params.event_name, stored, key);
        if (keyed.kind === 'not_waiting') return notWaiting();
        return { status: 200, body: keyed.answer };
      }
      const outcome = await deliverEvent(db, params.id, params.event_name, stored);
      if (outcome.kind === 'not_waiting') throw await notWaitingError();
      return { status: 200, body: { status: 'delivered' as const, execution_id: outcome.execution.id, event_name: params.event_name, execution_status: outcome.execution.status } };
    };

    if (!deps.tracing) return deliver(execution);
    // A span of its own, under the request's traceparent, linked to the trace of the execution it resumes.
    const span = deps.tracing.startDelivery({
      executionId: execution.id,
      task: execution.task,
      eventName: params.event_name,
      executionTraceparent: execution.traceparent,
      requestTraceparent: ctx.get('traceparent') || undefined,
    });
    try {
      const answer = await deliver(execution);
      span.end(answer.body.status);
      return answer;
    } catch (err) {
      span.end(err instanceof AppError ? err.code : 'error');
      throw err;
    }
  });
}
