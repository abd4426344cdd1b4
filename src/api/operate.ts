import type Router from '@koa/router';
import { parseInstant } from '../domain/instant';
import { ACTIVE_STATUSES, type ExecutionStatus } from '../domain/status';
import { ExecutionNotFoundError, ExecutionNotRetryableError, ExecutionNotUpgradableError, InvalidDataError, TaskVersionNotServedError } from '../errors';
import { listAttempts } from '../store/attempts';
import { findBulkTargets } from '../store/bulk';
import type { Db } from '../store/db';
import { cancelExecution } from '../store/transitions/cancel';
import { retryExecution } from '../store/transitions/retry';
import { isVersionServed, UPGRADABLE, upgradeExecution } from '../store/transitions/upgrade';
import { shownVersion } from '../domain/version';
import type { ApiDeps } from './deps';
import { operatorMetrics } from './metrics';
import { toAttempt } from './representations';
import type { ApiState } from './state';
import { addOperation } from './typed';

/** Statements of a bulk action in flight at once: each its own transaction, a few side by side. */
const BULK_PARALLEL = 4;
const RETRYABLE: readonly ExecutionStatus[] = ['failed', 'cancelled'];

/** The operator's half: an execution's attempts, retry from the failure, upgrades, and bulk cancel, retry and upgrade. */
export function addOperateRoutes(router: Router<ApiState>, deps: ApiDeps): void {
  const { db } = deps;
  const metrics = operatorMetrics(deps.registry);

  addOperation(router, deps.routes, 'listExecutionAttempts', async ({ params }) => {
    const attempts = await listAttempts(db, params.id);
    if (!attempts) throw new ExecutionNotFoundError(params.id);
    return { status: 200, body: { attempts: attempts.map(toAttempt) } };
  });

  addOperation(router, deps.routes, 'retryExecution', async ({ params }) => {
    const outcome = await retryExecution(db, params.id);
    switch (outcome.kind) {
      case 'retried':
        metrics.retried('single');
        return { status: 200, body: { execution_id: outcome.execution.id, status: 'pending' as const } };
      case 'not_retryable':
        throw new ExecutionNotRetryableError(outcome.execution.id, outcome.execution.status);
      case 'not_found':
        throw new ExecutionNotFoundError(params.id);
    }
  });

  addOperation(router, deps.routes, 'upgradeExecution', async ({ params, body }) => {
    const outcome = await upgradeExecution(db, params.id, body.version ?? '');
    switch (outcome.kind) {
      case 'upgraded':
        metrics.upgraded(1);
        return {
          status: 200,
          body: { execution_id: outcome.id, status: outcome.status as 'pending' | 'waiting' | 'running', task_version: shownVersion(body.version ?? ''), previous_task_version: shownVersion(outcome.previous) },
        };
      case 'not_upgradable':
        throw new ExecutionNotUpgradableError(outcome.id, outcome.status, outcome.held);
      case 'not_served':
        throw new TaskVersionNotServedError(outcome.task, body.version ?? null);
      case 'not_found':
        throw new ExecutionNotFoundError(params.id);
    }
  });

  addOperation(router, deps.routes, 'bulkUpgradeExecutions', async ({ body }) => {
    const version = body.version ?? '';
    // Checked once up front, for a clear answer; each row's statement checks again.
    if (!(await isVersionServed(db, body.task, version))) throw new TaskVersionNotServedError(body.task, body.version ?? null);
    const taskVersion = body.task_version === undefined ? undefined : (body.task_version ?? '');
    const result = await bulk(db, { ...body, taskVersion }, UPGRADABLE, async (id) => (await upgradeExecution(db, id, version)).kind === 'upgraded');
    metrics.bulk('upgrade', result.matched, result.changed);
    metrics.upgraded(result.changed);
    return { status: 200, body: result };
  });

  addOperation(router, deps.routes, 'bulkCancelExecutions', async ({ body }) => {
    const result = await bulk(db, body, ACTIVE_STATUSES, async (id) => (await cancelExecution(db, id)).kind === 'cancelled');
    metrics.bulk('cancel', result.matched, result.changed);
    return { status: 200, body: result };
  });

  addOperation(router, deps.routes, 'bulkRetryExecutions', async ({ body }) => {
    const result = await bulk(db, body, RETRYABLE, async (id) => (await retryExecution(db, id)).kind === 'retried');
    metrics.bulk('retry', result.matched, result.changed);
    return { status: 200, body: result };
  });
}

interface BulkBody {
  task?: string;
  /** As stored ('' for the task without a version). */
  taskVersion?: string;
  status?: ExecutionStatus;
  created_after?: string;
  created_before?: string;
  tag?: string[];
  limit?: number;
}

/**
 * Finds what the filter matches among the statuses the action applies to, then changes each with a
 * statement of its own (`change` says whether it did: a row that moved on meanwhile is left alone).
 */
async function bulk(db: Db, body: BulkBody, applies: readonly ExecutionStatus[], change: (id: string) => Promise<boolean>): Promise<{ matched: number; changed: number }> {
  const createdAfter = body.created_after === undefined ? undefined : parseInstant(body.created_after);
  const createdBefore = body.created_before === undefined ? undefined : parseInstant(body.created_before);
  const bad = [
    ...(body.created_after !== undefined && !createdAfter ? ['created_after'] : []),
    ...(body.created_before !== undefined && !createdBefore ? ['created_before'] : []),
  ];
  if (bad.length > 0) throw new InvalidDataError('request body is invalid', bad.map((f) => ({ path: `body/${f}`, message: 'must be an instant in the years 0001 to 9999 (UTC)' })));
  // A status the action does not apply to matches nothing (cancelling a completed execution, say).
  const statuses = body.status === undefined ? applies : applies.filter((s) => s === body.status);
  const ids = statuses.length === 0 ? [] : await findBulkTargets(db, { statuses, task: body.task, taskVersion: body.taskVersion, createdAfter, createdBefore, tags: body.tag, limit: body.limit ?? 1000 });
  let changed = 0;
  let next = 0;
  const lane = async () => {
    while (next < ids.length) {
      const id = ids[next++];
      if (await change(id)) changed += 1;
    }
  };
  await Promise.all(Array.from({ length: Math.min(BULK_PARALLEL, ids.length) }, lane));
  return { matched: ids.length, changed };
}
