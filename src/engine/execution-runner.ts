import { toStorableJson } from '../domain/json';
import { computeRetryDelay, hasAttemptsLeft } from '../domain/retry';
import { GroupCommitter, landedFlags } from '../group-commit';
import type { Logger } from '../logger';
import type { Db } from '../store/db';
import { isDatabaseUnavailable } from '../store/db-errors';
import { failExecution } from '../store/transitions/fail';
import { type ClaimedExecution } from '../store/transitions/claim';
import { type Completion } from '../store/transitions/complete';
import type { StepKind } from '../store/rows';
import { loadSteps, recordStepResults, stepKey, type StepResult } from '../store/steps';
import { ChildTaskChecker } from './children';
import { retryWhileUnavailable } from './db-retry';
import { DurableContext } from './durable-context';
import { isNonRetryable, LeaseLostError, StoreUnavailableError, SuspendSignal } from './errors';
import type { TaskRegistry } from './registry';
import type { HeldExecution } from './slot-pool';

/** How one run of a claimed execution ended; the worker acts on it (a pause wakes it up early). */
export type ExecutionOutcome =
  /** Its completion landed. */
  | { readonly kind: 'completed' }
  /** Failed for good, recorded. */
  | { readonly kind: 'failed' }
  /** Failed, recorded, due again at wakeAt. */
  | { readonly kind: 'retrying'; readonly wakeAt: Date }
  /** Paused (sleep, event, child), recorded; due again at wakeAt when it has a deadline. */
  | { readonly kind: 'suspended'; readonly wakeAt: Date | null }
  /** No longer this worker's: cancelled, taken over or released; its write, if any, was fenced out. */
  | { readonly kind: 'lost' }
  /** The database was away or refused the final write: left for takeover when the lease expires. */
  | { readonly kind: 'abandoned' };

// The outcomes without data are shared: a run allocates nothing to report them.
const COMPLETED: ExecutionOutcome = Object.freeze({ kind: 'completed' });
const FAILED: ExecutionOutcome = Object.freeze({ kind: 'failed' });
const LOST: ExecutionOutcome = Object.freeze({ kind: 'lost' });
const ABANDONED: ExecutionOutcome = Object.freeze({ kind: 'abandoned' });

/** The hooks of WorkerObserver that concern one run of an execution. */
export interface ExecutionObserver {
  finished?(task: string, outcome: 'completed' | 'failed' | 'retrying' | 'suspended' | 'lost', durationMs: number): void;
  step?(task: string, kind: StepKind, durationMs: number): void;
}

export interface ExecutionRunnerOptions {
  db: Db;
  log: Logger;
  registry: TaskRegistry;
  observer?: ExecutionObserver;
  /** Writes a completion (the worker group-commits it with its next claim); false when the lease was lost. */
  complete: (completion: Completion) => Promise<boolean>;
  /** The handler returned or threw: its slot may serve another execution while the final write runs. */
  onHandlerReturned: (held: HeldExecution) => void;
}

/**
 * Runs one claimed execution: loads its history, runs its handler in a DurableContext whose steps are
 * group-committed, writes the completion or the failure (retried with backoff, or final), and returns
 * the outcome. It owns no slot and no lease: both belong to the HeldExecution it is given.
 */
export class ExecutionRunner {
  private readonly children: ChildTaskChecker;
  /** Step records of all running executions, written together (see GroupCommitter). */
  private readonly stepRecords: GroupCommitter<StepResult, boolean>;

  constructor(private readonly options: ExecutionRunnerOptions) {
    this.children = new ChildTaskChecker(options.db);
    this.stepRecords = new GroupCommitter(landedFlags((items: StepResult[]) => recordStepResults(options.db, items), (s) => stepKey(s.id, s.seq)), isDatabaseUnavailable);
  }

  /** Never rejects for the handler's sake: every failure ends in an outcome. */
  async run(claimed: ClaimedExecution, held: HeldExecution): Promise<ExecutionOutcome> {
    const { execution } = claimed;
    const started = Date.now();
    // Made on first use: most executions never log (a child logger serializes its bindings).
    let child: Logger | undefined;
    const log = () => (child ??= this.options.log.child({ executionId: execution.id, task: execution.task, attempt: execution.attempt }));
    const registered = this.options.registry.get(execution.task);
    if (!registered) return LOST; // claims filter by task; unreachable
    const writeDeadline = () => held.leaseExpiresAt;
    try {
      // A fresh execution has no history: skip the read.
      const fresh = claimed.previousStatus === 'pending' && execution.attempt === 1 && execution.stepsCompleted === 0;
      const history = fresh ? [] : await retryWhileUnavailable(() => loadSteps(this.options.db, execution.id), writeDeadline());
      const ctx = new DurableContext({
        db: this.options.db,
        lease: held.lease,
        attempt: execution.attempt,
        scheduledFor: claimed.scheduledFor,
        history,
        claimedAt: claimed.claimedAt,
        claimedLocally: started,
        abort: held.controller,
        log,
        writeDeadline,
        claimCommitted: held.claimCommitted,
        recordStep: (step) => this.stepRecords.submit(step),
        children: this.children,
        onStep: (_name, kind, ms) => this.options.observer?.step?.(execution.task, kind, ms),
      });
      const output = await registered.def.run(ctx as never, execution.data as never);
      this.options.onHandlerReturned(held);
      if (held.controller.aborted) throw held.controller.reason;
      toStorableJson(output, 'the handler\'s return value');
      await held.claimCommitted;
      // A completion that cannot be written is handled below like the handler's own failure.
      const landed = await retryWhileUnavailable(() => this.options.complete({ ...held.lease, output, parentId: execution.parentId }), writeDeadline());
      if (landed) {
        if (this.options.log.isLevelEnabled('debug')) log().debug({ durationMs: Date.now() - started }, 'execution completed');
        this.options.observer?.finished?.(execution.task, 'completed', Date.now() - started);
        return COMPLETED;
      }
      log().info('result discarded: execution was cancelled or taken over');
      this.options.observer?.finished?.(execution.task, 'lost', Date.now() - started);
      return LOST;
    } catch (err) {
      return await this.settleFailure(err, claimed, held, log, started);
    }
  }

  private async settleFailure(err: unknown, claimed: ClaimedExecution, held: HeldExecution, log: () => Logger, started: number): Promise<ExecutionOutcome> {
    this.options.onHandlerReturned(held);
    const { execution } = claimed;
    const durationMs = Date.now() - started;
    if (err instanceof SuspendSignal) {
      if (this.options.log.isLevelEnabled('debug')) log().debug({ until: err.until }, 'execution suspended');
      this.options.observer?.finished?.(execution.task, 'suspended', durationMs);
      return { kind: 'suspended', wakeAt: err.until };
    }
    if (err instanceof StoreUnavailableError) {
      // The database stayed away past the lease: abandon the attempt without recording a failure (that
      // would need the database, and an outage must not use up retries); it is taken over on expiry.
      log().warn({ err: err.message }, 'database unavailable; execution left for takeover when its lease expires');
      this.options.observer?.finished?.(execution.task, 'lost', durationMs);
      return ABANDONED;
    }
    if (err instanceof LeaseLostError || held.controller.aborted) {
      log().info('execution no longer held: cancelled, taken over or released');
      this.options.observer?.finished?.(execution.task, 'lost', durationMs);
      return LOST;
    }
    const registered = this.options.registry.get(execution.task);
    const retryable = !isNonRetryable(err) && registered !== undefined && hasAttemptsLeft(registered.retry, execution.attempt);
    const error = {
      type: err instanceof Error ? (err.name || 'Error').slice(0, 200) : 'Error',
      message: (err instanceof Error ? err.message : String(err)).slice(0, 4000),
      retryable,
    };
    const delay = retryable && registered ? computeRetryDelay(registered.retry, execution.attempt) : null;
    await held.claimCommitted;
    try {
      const landed = await retryWhileUnavailable(() => failExecution(this.options.db, held.lease, error, delay, execution.parentId), held.leaseExpiresAt);
      if (!landed) return LOST;
      if (delay !== null) {
        log().warn({ errorType: error.type, retryInMs: delay }, 'attempt failed; retrying');
        this.options.observer?.finished?.(execution.task, 'retrying', durationMs);
        return { kind: 'retrying', wakeAt: new Date(Date.now() + delay) };
      }
      log().warn({ errorType: error.type }, 'execution failed');
      this.options.observer?.finished?.(execution.task, 'failed', durationMs);
      return FAILED;
    } catch (writeErr) {
      log().error({ err: (writeErr as Error).message }, 'could not record failure; the lease will expire and the execution be retried');
      return ABANDONED;
    }
  }
}
