import type Router from '@koa/router';
import { ACTIVE_STATUSES, type ExecutionStatus } from '../domain/status';
import { ExecutionNotFoundError, ExecutionNotRetryableError, ExecutionNotUpgradableError, TaskVersionNotServedError } from '../errors';
import { listAttempts } from '../store/attempts';
import { cancelExecution } from '../store/transitions/cancel';
import { retryExecution } from '../store/transitions/retry';
import { isVersionServed, UPGRADABLE, upgradeExecution } from '../store/transitions/upgrade';
import { shownVersion } from '../domain/version';
import { runBulk } from './bulk-runner';
import type { ApiDeps } from './deps';
import { operatorMetrics } from './metrics';
import { toAttempt } from './representations';
import type { ApiState } from './state';
import { addOperation } from './typed';

const RETRYABLE: readonly ExecutionStatus[] = ['failed', 'cancelled'];

/** The operator's half: an execution's attempts, retry from the failure, upgrades, and bulk cancel, retry and upgrade. */
export function addOperateRoutes(router: Router<ApiState>, deps: ApiDeps): void {
  const { db } = deps;
  const metrics = operatorMetrics(deps.registry);
  const bounds = { batchSize: deps.config.http.bulkBatchSize, budgetMs: deps.config.http.bulkBudgetMs };

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
    const result = await runBulk(db, { ...body, taskVersion }, UPGRADABLE, bounds, async (id) => (await upgradeExecution(db, id, version)).kind === 'upgraded');
    metrics.bulk('upgrade', result.matched, result.changed);
    metrics.upgraded(result.changed);
    return { status: 200, body: result };
  });

  addOperation(router, deps.routes, 'bulkCancelExecutions', async ({ body }) => {
    const result = await runBulk(db, body, ACTIVE_STATUSES, bounds, async (id) => (await cancelExecution(db, id)).kind === 'cancelled');
    metrics.bulk('cancel', result.matched, result.changed);
    return { status: 200, body: result };
  });

  addOperation(router, deps.routes, 'bulkRetryExecutions', async ({ body }) => {
    const result = await runBulk(db, body, RETRYABLE, bounds, async (id) => (await retryExecution(db, id)).kind === 'retried');
    metrics.bulk('retry', result.matched, result.changed);
    return { status: 200, body: result };
  });
}
