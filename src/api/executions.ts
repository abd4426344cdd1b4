import type Router from '@koa/router';
import { parseInstant } from '../domain/instant';
import { reservedKeyPrefix } from '../domain/keys';
import { parseTraceparent } from '../domain/traceparent';
import { ExecutionAlreadyExistsError, ExecutionNotCancellableError, ExecutionNotFoundError, InvalidDataError } from '../errors';
import { getExecution, insertDebounced, listExecutions } from '../store/executions';
import { cancelExecution } from '../store/transitions/cancel';
import { loadStepPage } from '../store/steps';
import { listCursor, readListCursor } from './cursors';
import type { ApiDeps } from './deps';
import { toExecution, toExecutionSummary, toScheduledExecution, toStep } from './representations';
import type { ApiState } from './state';
import { toValidData } from './task-checks';
import { addOperation } from './typed';

/**
 * A date-time query parameter that validation let through (`format: date-time`) as an instant; one the
 * contract's timestamps could not write (outside the years 0001-9999 in UTC) is invalid data.
 */
function queryInstant(query: Partial<Record<'created_after' | 'created_before', string>>, name: 'created_after' | 'created_before'): Date | undefined {
  const text = query[name];
  if (text === undefined) return undefined;
  const instant = parseInstant(text);
  if (!instant) throw new InvalidDataError('query is invalid', [{ path: `query/${name}`, message: 'must be an instant in the years 0001 to 9999 (UTC)' }]);
  return instant;
}

/**
 * The W3C `traceparent` header a schedule came with, kept with the execution so that its attempts are
 * spans in the caller's trace (migration 017). The header is not part of the contract's body: one
 * that is not a valid version-00 traceparent is ignored, not refused, as the Trace Context
 * specification has a receiver do (the execution then makes a trace of its own).
 */
function requestTraceparent(header: string): string | undefined {
  return header !== '' && parseTraceparent(header) ? header : undefined;
}

/**
 * Where a page of steps ends, as openapi.yaml states it: results may be up to the value limit each, so
 * a page by count alone could hold hundreds of MiB, and the API would build all of it in memory.
 */
const STEP_PAGE_BYTES = 4 * 1024 * 1024;

/** Schedule, read, list, cancel and the steps of executions. */
export function addExecutionRoutes(router: Router<ApiState>, deps: ApiDeps): void {
  const { db, taskSchemas, inserts } = deps;

  addOperation(router, deps.routes, 'scheduleExecution', async ({ body, ctx }) => {
    // The body's shape was checked by validation; now the task, then its data (the contract's order).
    const startAt = body.start_at === undefined ? undefined : parseInstant(body.start_at);
    const reserved = body.idempotency_key === undefined ? undefined : reservedKeyPrefix(body.idempotency_key);
    if (reserved) {
      throw new InvalidDataError('request body is invalid', [{ path: 'body/idempotency_key', message: `must not start with "${reserved.prefix}", which ${reserved.owner} use` }]);
    }
    if (body.start_at !== undefined && startAt === undefined) {
      throw new InvalidDataError('request body is invalid', [{ path: 'body/start_at', message: 'must be an instant in the years 0001 to 9999 (UTC)' }]);
    }
    const task = await taskSchemas.getTask(body.task);
    const data = toValidData(task, body.data);
    const item = { task: body.task, data, idempotencyKey: body.idempotency_key, startAt, tags: body.tags, priority: body.priority, traceparent: requestTraceparent(ctx.get('traceparent')) };
    // A debounced schedule may update the pending execution: a statement of its own, never batched.
    const result = (task.debounced ? await insertDebounced(db, item) : undefined) ?? (await inserts.submit(item));
    if (result.created) return { status: 201, body: toScheduledExecution(result.execution, result.debounced) };
    if (result.execution.task !== body.task) throw new ExecutionAlreadyExistsError(body.idempotency_key ?? '', result.execution.task);
    return { status: 200, body: toScheduledExecution(result.execution, result.debounced) };
  });

  addOperation(router, deps.routes, 'getExecution', async ({ params }) => {
    const execution = await getExecution(db, params.id);
    if (!execution) throw new ExecutionNotFoundError(params.id);
    return { status: 200, body: toExecution(execution) };
  });

  addOperation(router, deps.routes, 'listExecutions', async ({ query }) => {
    // Validation applied the spec's defaults and clamped limit, so these are always set.
    const limit = query.limit as number;
    const offset = query.offset as number;
    const order = query.order ?? 'desc';
    // An offset walks every execution it skips: past the bound, keyset paging costs a first page.
    const maxOffset = deps.config.http.listMaxOffset;
    if (offset > maxOffset) {
      throw new InvalidDataError('query is invalid', [{ path: 'query/offset', message: `must be at most ${maxOffset}; page deeper with cursor (each page's next_cursor)` }]);
    }
    if (query.cursor !== undefined && offset > 0) throw new InvalidDataError('query is invalid', [{ path: 'query/offset', message: 'must be 0 or absent with cursor' }]);
    const after = query.cursor === undefined ? undefined : readListCursor(query.cursor, order);
    const createdAfter = queryInstant(query, 'created_after');
    const createdBefore = queryInstant(query, 'created_before');
    const page = await listExecutions(db, {
      status: query.status,
      task: query.task,
      parentId: query.parent_execution_id,
      tags: query.tag,
      idempotencyKey: query.idempotency_key,
      createdAfter,
      createdBefore,
      limit,
      offset,
      order,
      after,
    });
    const next = page.next ? listCursor(order, page.next) : null;
    return { status: 200, body: { executions: page.items.map(toExecutionSummary), total: page.total, limit, offset, next_cursor: next } };
  });

  addOperation(router, deps.routes, 'cancelExecution', async ({ params }) => {
    const outcome = await cancelExecution(db, params.id);
    switch (outcome.kind) {
      case 'cancelled':
      case 'already_cancelled':
        return { status: 200, body: { execution_id: outcome.execution.id, status: 'cancelled' as const } };
      case 'not_cancellable':
        throw new ExecutionNotCancellableError(outcome.execution.id, outcome.execution.status);
      case 'not_found':
        throw new ExecutionNotFoundError(params.id);
    }
  });

  addOperation(router, deps.routes, 'listExecutionSteps', async ({ params, query }) => {
    // Two reads: steps alone cannot tell "no steps yet" from "no such execution".
    const execution = await getExecution(db, params.id);
    if (!execution) throw new ExecutionNotFoundError(params.id);
    // Validation applied the spec's default and clamped limit.
    const limit = query.limit as number;
    const page = await loadStepPage(db, params.id, query.after_seq ?? -1, limit, STEP_PAGE_BYTES);
    const last = page.steps[page.steps.length - 1];
    return { status: 200, body: { items: page.steps.map(toStep), limit, next_after_seq: page.more && last ? last.seq : null } };
  });
}
