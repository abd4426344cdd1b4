import type Router from '@koa/router';
import { hostname as localHostname } from 'node:os';
import type { components } from '../../../generated/openapi';
import { newExecutionId } from '../../domain/ids';
import { cronKey } from '../../engine/cron';
import { AppError, InvalidDataError } from '../../errors';
import { startChild } from '../../store/children';
import { queryRows } from '../../store/db';
import { insertExecutions } from '../../store/executions';
import { renewLeases, setCurrentStep, type Lease } from '../../store/leases';
import { completeTimedStep, hasStepFailure, recordStepFailure } from '../../store/steps';
import { rekeyExecutions, upsertTasks } from '../../store/tasks';
import { failExecutionFindingParent } from '../../store/transitions/fail';
import { releaseExecutions, returnUnstarted } from '../../store/transitions/release';
import { closeOpenWaits, suspendExecution } from '../../store/transitions/suspend';
import { recordHeartbeatOfRow, startingTasks } from '../../store/versions';
import { deleteLostWorkers, deleteWorker, markWorkerStopping, registerWorker } from '../../store/workers';
import type { ApiDeps } from '../deps';
import type { ApiState } from '../state';
import { toValidChildData } from './registrations';
import { addOperation, type RouteOptions } from '../typed';
import type { WorkerProtocol } from './protocol';
import { toTaskRegistrations } from './registrations';
import { DONE, itemError, leaseLost, tooLarge, toActivation, type ItemError } from './wire';

type Schemas = components['schemas'];

/** When a registration changed a task's keys, how long until the task's unfinished executions are keyed again (as a worker does). */
const REKEY_AGAIN_MS = 10_000;
/** Forgetting long-lost workers runs on one heartbeat in this many, as a worker's own presence does. */
const FORGET_EVERY_BEATS = 12;
const FORGET_LOST_AFTER_MS = 60 * 60 * 1000;

/** A lease named by a protocol item. */
const leaseOf = (item: { execution_id: string; lease_token: string }): Lease => ({ id: item.execution_id, token: item.lease_token });

/** The item's answer when a write returned an AppError for it (task unknown, data invalid); other errors fail the request. */
async function answering<T>(write: () => Promise<T | ItemError>): Promise<T | ItemError> {
  try {
    return await write();
  } catch (err) {
    if (err instanceof AppError) return itemError(err);
    throw err;
  }
}

/**
 * The worker protocol (tag `Worker protocol` in openapi.yaml): what a remote worker needs to run
 * handlers with no database of its own. Every write is fenced by its lease, item by item.
 */
export function addWorkerProtocolRoutes(router: Router<ApiState>, deps: ApiDeps, routes: RouteOptions, protocol: WorkerProtocol): void {
  const { db } = deps;
  const valueBytes = deps.config.limits.valueBytes;
  const { claims, steps, completions, finished, suspended: suspensions } = protocol;
  let beats = Math.floor(Math.random() * FORGET_EVERY_BEATS);

  addOperation(router, routes, 'registerWorker', async ({ body }) => {
    const tasks = toTaskRegistrations(body.tasks);
    const startedAt = body.started_at === undefined ? undefined : new Date(body.started_at);
    const registration = {
      id: body.worker_id,
      hostname: body.hostname ?? localHostname(),
      pid: body.pid ?? 0,
      version: body.version ?? '',
      tasks: tasks.map((t) => t.name).sort(),
      taskVersions: Object.fromEntries(tasks.map((t) => [t.name, t.version ?? ''])),
      concurrency: body.concurrency,
      running: 0,
      lostAfterMs: body.lost_after_ms ?? 15000,
      startedAt,
    };
    const started = await registerWorker(db, registration);
    // Registering again after the row was forgotten: the tasks stay as they are (another version may be current).
    if (startedAt === undefined) {
      const rekeyed = await upsertTasks(db, tasks);
      if (rekeyed.length > 0) protocol.later(REKEY_AGAIN_MS, () => rekeyExecutions(db, rekeyed));
    }
    const starting = await startingTasks(db, tasks.map((t) => ({ name: t.name, version: t.version ?? '' })));
    return { status: 200, body: { worker_id: body.worker_id, started_at: started.toISOString(), starting: [...starting].sort() } };
  });

  addOperation(router, routes, 'workerHeartbeat', async ({ body }) => {
    const state = body.state ?? 'active';
    const leases = (body.leases ?? []).map(leaseOf);
    const [renewed, presence] = await Promise.all([
      leases.length > 0 ? renewLeases(db, leases, body.lease_ms ?? 30000) : Promise.resolve(new Set<string>()),
      state === 'active'
        ? recordHeartbeatOfRow(db, body.worker_id, body.running)
        : state === 'stopping'
          ? markWorkerStopping(db, body.worker_id, body.running).then(() => ({ found: true, starting: new Set<string>() }))
          : deleteWorker(db, body.worker_id).then(() => ({ found: false, starting: new Set<string>() })),
    ]);
    const notRenewed = leases.filter((l) => !renewed.has(l.id)).map((l) => l.id);
    const cancelled = notRenewed.length === 0 ? new Set<string>() : await cancelledAmong(notRenewed);
    if (++beats % FORGET_EVERY_BEATS === 0) void deleteLostWorkers(db, FORGET_LOST_AFTER_MS).catch(() => undefined);
    return {
      status: 200,
      body: {
        registered: presence.found,
        renewed: leases.filter((l) => renewed.has(l.id)).map((l) => l.id),
        lost: notRenewed.map((id) => ({ execution_id: id, reason: cancelled.has(id) ? ('cancelled' as const) : ('lost' as const) })),
        starting: [...presence.starting].sort(),
      },
    };
  });

  /** Which of these executions are cancelled (why their leases did not renew). */
  async function cancelledAmong(ids: string[]): Promise<Set<string>> {
    const rows = await queryRows<{ id: string }>(db, `SELECT id FROM stepwise.executions WHERE id = ANY(?::uuid[]) AND status = 'cancelled'`, [ids]);
    return new Set(rows.map((r) => r.id));
  }

  addOperation(router, routes, 'claimActivations', async ({ body, ctx }) => {
    const max = body.max;
    const outcome = await claims.claim(
      {
        workerId: body.worker_id,
        tasks: body.tasks.map((t) => ({ name: t.name, version: t.version ?? '', startsNew: t.starts_new ?? true })),
        max,
        slots: Math.min(max, body.slots ?? max),
        leaseMs: body.lease_ms ?? 30000,
        waitMs: body.wait_ms ?? 20000,
      },
      (gone) => ctx.res.once('close', () => ctx.res.writableEnded || gone()),
    );
    return { status: 200, body: { activations: outcome.activations.map(toActivation), waited_ms: outcome.waitedMs, throttled: outcome.throttled } };
  });

  addOperation(router, routes, 'recordSteps', async ({ body }) => {
    const results = await Promise.all(
      body.items.map(async (item, i) => {
        const refused = tooLarge(item.result, valueBytes, `body/items/${i}/result`);
        if (refused) return refused;
        // Always the idempotent form: the worker may send a step again after a lost answer.
        const step = { id: item.execution_id, token: item.lease_token, seq: item.seq, name: item.name, kind: item.kind ?? 'step', result: item.result, startedAt: new Date(item.started_at), resent: true };
        return (await steps.submit(step)) ? DONE : leaseLost(item.execution_id);
      }),
    );
    protocol.progressed(body.items.map((i) => i.execution_id));
    return { status: 200, body: { results } };
  });

  addOperation(router, routes, 'recordStepFailures', async ({ body }) => {
    const results = await Promise.all(
      body.items.map(async (item) => {
        const lease = leaseOf(item);
        const failure = { seq: item.seq, name: item.name, attempt: item.attempt, error: item.error, startedAt: new Date(item.started_at), final: item.final, retryAt: item.retry_at ? new Date(item.retry_at) : undefined };
        if (await recordStepFailure(db, lease, failure)) return DONE;
        // A final failure sent again finds the step closed: kept already, under this lease, is the same answer.
        return (await hasStepFailure(db, lease, item.seq, item.attempt)) ? DONE : leaseLost(item.execution_id);
      }),
    );
    return { status: 200, body: { results } };
  });

  addOperation(router, routes, 'finishTimedOperations', async ({ body }) => {
    const results = await Promise.all(
      body.items.map(async (item): Promise<Schemas['TimedOperationDone'] | ItemError> => {
        const timed = await completeTimedStep(db, leaseOf(item), item.seq, item.ends === 'sleep' ? { slept: true } : { timed_out: true }).catch((err: Error) => {
          // No operation at that position: the item names one the history lacks.
          if (/has no operation at/.test(err.message)) throw new InvalidDataError('request body is invalid', [{ path: 'body/items/seq', message: err.message }]);
          throw err;
        });
        if (timed.kind === 'lost') return leaseLost(item.execution_id);
        if (timed.kind === 'not_due') return { status: 200, outcome: 'not_due' };
        return { status: 200, outcome: timed.kind, result: timed.result };
      }),
    );
    protocol.progressed(body.items.map((i) => i.execution_id));
    return { status: 200, body: { results } };
  });

  addOperation(router, routes, 'recordCurrentSteps', async ({ body }) => {
    const results = await Promise.all(body.items.map(async (item) => ((await setCurrentStep(db, leaseOf(item), item.name)) ? DONE : leaseLost(item.execution_id))));
    protocol.progressed(body.items.map((i) => i.execution_id));
    return { status: 200, body: { results } };
  });

  addOperation(router, routes, 'startChildren', async ({ body }) => {
    const results = await Promise.all(
      body.items.map((item, i) =>
        answering(async (): Promise<Schemas['ChildStarted'] | ItemError> => {
          const refused = tooLarge(item.data, valueBytes, `body/items/${i}/data`);
          if (refused) return refused;
          // Checked as a worker with a database checks it (ChildTaskChecker): the task registered, the data against its schema.
          const data = toValidChildData(await deps.taskSchemas.getTask(item.task), item.data, `body/items/${i}/data`);
          const child = {
            id: newExecutionId(),
            seq: item.seq,
            name: item.name,
            task: item.task,
            data,
            startAt: item.start_at === undefined ? undefined : new Date(item.start_at),
            detached: item.detached,
            timeoutMs: item.timeout_ms,
            priority: item.priority,
            traceparent: item.traceparent,
          };
          const id = await startChild(db, leaseOf(item), child);
          return id === undefined ? leaseLost(item.execution_id) : { status: 200, child_execution_id: id };
        }),
      ),
    );
    return { status: 200, body: { results } };
  });

  addOperation(router, routes, 'suspendExecutions', async ({ body }) => {
    const results = await Promise.all(
      body.items.map(async (item): Promise<Schemas['Suspended'] | ItemError> => {
        const waits = item.waits.map((w) => ({ seq: w.seq, name: w.name, kind: w.kind, eventName: w.event_name, wakeAt: w.wake_at ? new Date(w.wake_at) : null }));
        const superseded = (item.superseded ?? []).map((w) => ({ seq: w.seq, name: w.name, kind: 'event' as const, eventName: w.event_name, wakeAt: null }));
        // current_step names the earliest wait, as a worker's own suspension does.
        const first = waits.reduce((a, b) => (b.seq < a.seq ? b : a));
        const suspended = await suspendExecution(db, leaseOf(item), waits, item.deadline ? new Date(item.deadline) : null, first.name, superseded);
        if (!suspended) return suspensions.recall('suspend', item.lease_token) ?? leaseLost(item.execution_id);
        if (suspended.dueInMs !== null) claims.wakeIn(suspended.dueInMs);
        const answer = { status: 200 as const, wake_at: suspended.wakeAt ? suspended.wakeAt.toISOString() : null, due_in_ms: suspended.dueInMs };
        suspensions.remember('suspend', item.lease_token, answer);
        return answer;
      }),
    );
    return { status: 200, body: { results } };
  });

  addOperation(router, routes, 'closeWaits', async ({ body }) => {
    const results = await Promise.all(body.items.map(async (item) => ((await closeOpenWaits(db, leaseOf(item), item.seqs)) ? DONE : leaseLost(item.execution_id))));
    return { status: 200, body: { results } };
  });

  addOperation(router, routes, 'completeExecutions', async ({ body }) => {
    const results = await Promise.all(
      body.items.map(async (item, i) => {
        const refused = tooLarge(item.output, valueBytes, `body/items/${i}/output`);
        if (refused) return refused;
        const landed = await completions.submit({ id: item.execution_id, token: item.lease_token, output: item.output ?? null });
        if (!landed) return finished.recall('complete', item.lease_token) ?? leaseLost(item.execution_id);
        finished.remember('complete', item.lease_token, DONE);
        return DONE;
      }),
    );
    // A completion frees a place of a limited task that a waiting claim may take.
    if (claims.waitsOnLimits) claims.wake();
    return { status: 200, body: { results } };
  });

  addOperation(router, routes, 'failExecutions', async ({ body }) => {
    const results = await Promise.all(
      body.items.map(async (item) => {
        const attemptError = item.stack === undefined ? item.error : { ...item.error, stack: item.stack.slice(0, 8192) };
        const landed = await failExecutionFindingParent(db, leaseOf(item), item.error, item.retry_in_ms, attemptError);
        if (!landed) return finished.recall('fail', item.lease_token) ?? leaseLost(item.execution_id);
        if (item.retry_in_ms !== null) claims.wakeIn(item.retry_in_ms);
        finished.remember('fail', item.lease_token, DONE);
        return DONE;
      }),
    );
    if (claims.waitsOnLimits) claims.wake();
    return { status: 200, body: { results } };
  });

  addOperation(router, routes, 'releaseExecutions', async ({ body }) => {
    const unstarted = body.items.filter((i) => i.previous_status !== undefined);
    const started = body.items.filter((i) => i.previous_status === undefined);
    const [returned, released] = await Promise.all([
      returnUnstarted(db, unstarted.map((i) => ({ ...leaseOf(i), previousStatus: i.previous_status as 'pending' | 'waiting' | 'running' }))),
      releaseExecutions(db, started.map(leaseOf)),
    ]);
    const results = body.items.map((item) => {
      const landed = item.previous_status === undefined ? released.has(item.execution_id) : returned.has(item.execution_id);
      if (!landed) return finished.recall('release', item.lease_token) ?? leaseLost(item.execution_id);
      finished.remember('release', item.lease_token, DONE);
      return DONE;
    });
    claims.wake();
    return { status: 200, body: { results } };
  });

  addOperation(router, routes, 'fireCronSchedules', async ({ body }) => {
    const results = await Promise.all(
      body.items.map((item) =>
        answering(async (): Promise<Schemas['CronFired'] | ItemError> => {
          await deps.taskSchemas.getTask(item.task);
          const fireAt = new Date(item.fire_at);
          const [result] = await insertExecutions(db, [{ task: item.task, data: item.data ?? null, idempotencyKey: cronKey(item.task, fireAt), startAt: fireAt }]);
          return { status: 200, execution_id: result.execution.id, created: result.created, task: result.execution.task };
        }),
      ),
    );
    return { status: 200, body: { results } };
  });
}
