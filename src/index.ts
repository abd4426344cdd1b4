/**
 * The Stepwise worker SDK: define tasks with typed data and events, and run them durably.
 *
 * ```ts
 * import { defineTask, Type } from 'stepwise-workflows';
 * export const hello = defineTask({ name: 'hello', data: Type.Object({ who: Type.String() }),
 *   async run(ctx, data) { return ctx.step('greet', () => `hello ${data.who}`); } });
 * ```
 */
export { Type } from '@sinclair/typebox';
export type { Static, TSchema } from '@sinclair/typebox';
export { defineTask, isTaskDefinition } from './engine/task';
export type { TaskContext, TaskDefinition, TaskOptions, ChildOptions, InvokeOptions, StepOptions, StepAttempt, StepFn } from './engine/task';
export {
  NonRetryableError,
  EventTimeoutError,
  WaitSupersededError,
  ChildExecutionError,
  ChildTimeoutError,
  NonDeterminismError,
  LeaseLostError,
  StepTimeoutError,
  StepFailedError,
  ExecutionTimeoutError,
  ExecutionCancelledError,
  ExecutionReleasedError,
} from './engine/errors';
export type { Jsonify } from './domain/jsonify';
export type { Duration } from './domain/duration';
export type { CronTrigger } from './domain/cron';
export type { RetryPolicy } from './domain/retry';
export { schedule, IdempotencyKeyConflictError, TaskNotRegisteredError } from './engine/schedule';
export type { Queryable, ScheduleOptions, Scheduled } from './engine/schedule';
export { Worker } from './engine/worker';
export type { WorkerOptions, WorkerObserver } from './engine/worker';
export { RetentionSweeper } from './engine/retention';
export type { RetentionSweeperOptions } from './engine/retention';
export { loadTasksModule } from './engine/registry';
export { startTracing } from './telemetry/tracing';
export type { Tracing } from './telemetry/tracing';
