import { randomUUID } from 'node:crypto';
import type { Db } from '../../src/store/db';
import { type Lease } from '../../src/store/leases';
import { claimExecutions } from '../../src/store/transitions/claim';
import { completeExecutions } from '../../src/store/transitions/complete';
import { failExecution } from '../../src/store/transitions/fail';
import { suspendExecution } from '../../src/store/transitions/suspend';
import { upsertTasks } from '../../src/store/tasks';

/** Registers a task as a worker would at start-up. */
export async function registerTask(db: Db, name: string, dataSchema: unknown = null, eventSchemas: Record<string, unknown> = {}): Promise<void> {
  await upsertTasks(db, [{ name, dataSchema, eventSchemas, retry: null }]);
}

/** A fresh task name per test, so tests never see each other's executions. */
export function uniqueTask(prefix = 'task'): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/**
 * Stands in for the worker engine with the store's own lease functions: claims the execution with id
 * `id` (of task `task`), so tests can drive it through running, waiting, completed and failed.
 */
export async function claimExecution(db: Db, task: string, id: string): Promise<Lease> {
  const claimed = await claimExecutions(db, [task], 100, 30000);
  const mine = claimed.find((c) => c.execution.id === id);
  if (!mine) throw new Error(`simulated worker could not claim ${id}`);
  return { id, token: mine.execution.leaseToken as string };
}

/** Makes a claimed execution wait for `eventName` (as ctx.waitForEvent would), with no timeout. */
export async function waitForEventAs(db: Db, lease: Lease, eventName: string, seq = 0): Promise<void> {
  const done = await suspendExecution(db, lease, [{ seq, name: eventName, kind: 'event', eventName, wakeAt: null }], null, eventName);
  if (!done) throw new Error('simulated worker lost its lease');
}

/** Completes a claimed execution; returns whether the completion landed (it does not after a cancel). */
export async function completeAs(db: Db, lease: Lease, output: unknown): Promise<boolean> {
  return (await completeExecutions(db, [{ ...lease, output }])).has(lease.id);
}

/** Fails a claimed execution for good. */
export async function failAs(db: Db, lease: Lease, message: string): Promise<boolean> {
  return failExecution(db, lease, { type: 'Error', message, retryable: false }, null);
}

export type DrivenState = 'pending' | 'running' | 'waiting' | 'completed' | 'failed' | 'cancelled';

/** An execution put into `state` through the API and the simulated worker. */
export interface DrivenExecution {
  id: string;
  task: string;
  /** The simulated worker's lease while it is running. */
  lease?: Lease;
}

/** Any client with schedule and cancel: the test's spec-checked one. */
interface SchedulingClient {
  schedule(task: string, data?: unknown): Promise<{ execution_id: string }>;
  cancel(id: string): Promise<unknown>;
}

/**
 * Schedules an execution of a task of its own (so claims never touch other tests' executions) and
 * drives it into `state`; a waiting execution waits for `eventName`.
 */
export async function createExecutionIn(
  client: SchedulingClient,
  db: Db,
  state: DrivenState,
  options: { eventName?: string; dataSchema?: unknown; eventSchemas?: Record<string, unknown>; output?: unknown } = {},
): Promise<DrivenExecution> {
  const task = uniqueTask(state);
  await registerTask(db, task, options.dataSchema ?? null, options.eventSchemas ?? {});
  const { execution_id: id } = await client.schedule(task, {});
  if (state === 'pending') return { id, task };
  if (state === 'cancelled') {
    await client.cancel(id);
    return { id, task };
  }
  const lease = await claimExecution(db, task, id);
  if (state === 'running') return { id, task, lease };
  if (state === 'waiting') await waitForEventAs(db, lease, options.eventName ?? 'approval');
  else if (state === 'completed') await completeAs(db, lease, options.output ?? { ok: true });
  else await failAs(db, lease, 'simulated failure');
  return { id, task, lease };
}
