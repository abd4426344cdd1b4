import { parseDuration } from '../domain/duration';
import { newExecutionId } from '../domain/ids';
import { toInstant } from '../domain/instant';
import { toStoredValue } from '../domain/json';
import type { ChildStepResult } from '../store/children';
import type { ReplayRecord } from '../store/steps';
import type { OperationContext } from './operation-context';
import { ChildExecutionError, ChildTimeoutError, LeaseLostError, NonDeterminismError, NonRetryableError, usageError } from './errors';
import type { InvokeOptions, TaskDefinition } from './task';

/** ctx.invoke and ctx.spawn: start a child execution once, and wait for it durably (invoke). */
export class ChildSteps {
  constructor(private readonly context: () => OperationContext) {}

  private get ctx(): OperationContext {
    return this.context();
  }

  /**
   * Replays a finished child; otherwise starts it (once: a replay finds it by its key) and blocks on
   * it until it finishes or the invoke's timeout (the step's deadline) passes, whichever the database
   * decides came first.
   */
  async invoke(seq: number, key: string, recorded: ReplayRecord | undefined, task: TaskDefinition | string, data: unknown, options: InvokeOptions): Promise<unknown> {
    if (recorded?.completed) return childOutcome(seq, key, recorded.result as ChildStepResult);
    if (!recorded) {
      await this.start(seq, key, task, data, options, false);
      return this.ctx.suspension.block({ seq, name: key, kind: 'child', wakeAt: null }, (r) => childOutcome(seq, key, r.result as ChildStepResult));
    }
    this.ctx.throwIfAborted();
    if (recorded.wakeAt && recorded.wakeAt.getTime() <= this.ctx.databaseNow()) {
      // In flight, as a sleep's (see DurableContext.pause): no suspension before it is known to be over.
      const timed = await this.ctx.suspension.track(() => this.ctx.write(() => this.ctx.backend.completeTimedStep(this.ctx.lease, seq, { timed_out: true })));
      if (timed.kind === 'lost') throw new LeaseLostError(this.ctx.lease.id);
      if (timed.kind === 'completed') this.ctx.progressed?.();
      if (timed.kind !== 'not_due') return childOutcome(seq, key, timed.result as ChildStepResult);
    }
    return this.ctx.suspension.block({ seq, name: key, kind: 'child', wakeAt: recorded.wakeAt }, (r) => childOutcome(seq, key, r.result as ChildStepResult));
  }

  /** Checks the child's task and data, then inserts it with the step recording it (see startChild). */
  async start(seq: number, key: string, task: TaskDefinition | string, data: unknown, options: InvokeOptions, detached: boolean): Promise<string> {
    this.ctx.throwIfAborted();
    const taskName = typeof task === 'string' ? task : task?.name;
    if (typeof taskName !== 'string') throw usageError(new TypeError(`child ${JSON.stringify(key)}: the task must be a task name or a defineTask() result`));
    let startAt: Date | undefined;
    if (options.startAt !== undefined) {
      startAt = toInstant(options.startAt);
      if (!startAt) throw usageError(new RangeError(`child ${JSON.stringify(key)}: startAt ${String(options.startAt)} is not an instant`));
    }
    let timeoutMs: number | undefined;
    try {
      timeoutMs = options.timeout === undefined ? undefined : parseDuration(options.timeout, `invoke ${JSON.stringify(key)} timeout`);
    } catch (err) {
      throw usageError(err as Error);
    }
    const priority = options.priority;
    if (priority !== undefined && (typeof priority !== 'number' || !Number.isInteger(priority) || Math.abs(priority) > 1_000_000)) {
      throw usageError(new RangeError(`child ${JSON.stringify(key)}: priority must be a whole number from -1,000,000 to 1,000,000, not ${String(priority)}`));
    }
    // Checked, against the schema too, as it will be stored (see toStoredValue).
    let stored: unknown;
    try {
      stored = toStoredValue(data, `the data of child ${JSON.stringify(key)}`);
    } catch (err) {
      throw new NonRetryableError((err as Error).message);
    }
    return this.ctx.suspension.track(async () => {
      await this.ctx.children.check(taskName, stored);
      const id = newExecutionId();
      const started = Date.now();
      // The child's attempts are spans under this one: the child is in its parent's trace.
      const span = this.ctx.trace?.startStep(key, 'child', { 'stepwise.step.seq': seq, 'stepwise.child.task': taskName });
      let childId: string | undefined;
      try {
        childId = await this.ctx.write(() => this.ctx.backend.startChild(this.ctx.lease, { id, seq, name: key, task: taskName, data: stored, startAt, detached, timeoutMs, priority, traceparent: span?.traceparent }));
      } finally {
        // The id the insert made, or the one a replay found under the child's key.
        if (childId !== undefined) span?.setAttributes({ 'stepwise.child.execution_id': childId });
        span?.end(childId === undefined ? 'lost' : 'started');
      }
      if (childId === undefined) throw new LeaseLostError(this.ctx.lease.id);
      if (detached) this.ctx.onStep?.(key, 'child', Date.now() - started);
      return childId;
    });
  }
}

/** A finished child step as ctx.invoke returns it: the output, or ChildExecutionError. */
function childOutcome(seq: number, key: string, result: ChildStepResult): unknown {
  if (result.timed_out) throw new ChildTimeoutError(result.execution_id);
  // A step recorded by ctx.spawn holds only the id: the handler now invokes where it spawned.
  if (result.status === undefined) throw new NonDeterminismError(seq, { kind: 'spawn', name: key }, { kind: 'invoke', name: key });
  if (result.status === 'completed') return result.output;
  throw new ChildExecutionError(result.execution_id, result.status, result.error ?? null);
}
