import type { FlowPolicy } from '../domain/flow';
import type { Logger } from '../logger';
import { startChild, type NewChild } from '../store/children';
import type { Db } from '../store/db';
import { isDatabaseUnavailable } from '../store/db-errors';
import { insertExecutions } from '../store/executions';
import { renewLeases, setCurrentStep, type Lease } from '../store/leases';
import type { NotificationListener } from '../store/listener';
import type { ExecutionError } from '../store/rows';
import { completeTimedStep, loadReplayHistory, loadReplayRecords, recordStepFailure, recordStepResults, type StepFailureRecord, type StepResult, type TimedCompletion } from '../store/steps';
import { rekeyExecutions, upsertTasks, type TaskRegistration } from '../store/tasks';
import { claimExecutionsBeforeCommit, completeAndClaimBeforeCommit, type ClaimTask } from '../store/transitions/claim';
import { claimThrottledExecutions } from '../store/transitions/claim-throttled';
import type { Completion } from '../store/transitions/complete';
import { failExecution } from '../store/transitions/fail';
import { releaseExecutions, returnUnstarted, type Unstarted } from '../store/transitions/release';
import { closeOpenWaits, suspendExecution, type Wait } from '../store/transitions/suspend';
import { recordHeartbeatReadingStarting, startingTasks } from '../store/versions';
import { deleteLostWorkers, deleteWorker, markWorkerStopping, recordHeartbeat, registerWorker, type WorkerRegistration } from '../store/workers';
import { ChildTaskChecker } from './children';
import { cronKey } from './cron';
import { WorkNotifications } from './work-notifications';
import type { WorkerBackend, WorkSignalHandlers, WorkSignals } from './worker-backend';

/**
 * The worker's port over the database itself: each operation is the store's statement, as a worker
 * has always run it. The hot path adds nothing here: one method call in place of a function call.
 */
export class DirectWorkerBackend implements WorkerBackend {
  readonly claimWaits = false;
  readonly children: ChildTaskChecker;

  /**
   * @param databaseUrl for the LISTEN connection: a direct URL, never a transaction pooler's
   * @param listener the process's shared LISTEN connection, owned by the caller; else each worker opens its own
   */
  constructor(
    private readonly db: Db,
    private readonly databaseUrl: string,
    private readonly listener?: NotificationListener,
  ) {
    this.children = new ChildTaskChecker(db);
  }

  listen(handlers: WorkSignalHandlers, log: Logger): WorkSignals {
    return new WorkNotifications({ url: this.databaseUrl, listener: this.listener, log, ...handlers });
  }

  isUnavailable(err: unknown): boolean {
    return isDatabaseUnavailable(err);
  }

  interruptClaims(): void {
    // A claim here is one statement: nothing waits.
  }

  async register(worker: WorkerRegistration, tasks: readonly TaskRegistration[]): Promise<{ startedAt: Date; rekeyed: string[] }> {
    const startedAt = await registerWorker(this.db, worker);
    return { startedAt, rekeyed: tasks.length > 0 ? await upsertTasks(this.db, tasks) : [] };
  }

  rekeyExecutions(tasks: readonly string[]): Promise<void> {
    return rekeyExecutions(this.db, tasks);
  }

  async heartbeat(workerId: string, running: number, served: ReadonlyArray<{ name: string; version: string }> | undefined) {
    if (served) return recordHeartbeatReadingStarting(this.db, workerId, running, served);
    return { found: await recordHeartbeat(this.db, workerId, running) };
  }

  markStopping(workerId: string, running: number): Promise<void> {
    return markWorkerStopping(this.db, workerId, running);
  }

  deregister(workerId: string): Promise<void> {
    return deleteWorker(this.db, workerId);
  }

  forgetLostWorkers(afterMs: number): Promise<number> {
    return deleteLostWorkers(this.db, afterMs);
  }

  startingTasks(served: ReadonlyArray<{ name: string; version: string }>): Promise<Set<string>> {
    return startingTasks(this.db, served);
  }

  async fireCron(task: string, data: unknown, fireAt: Date) {
    const [result] = await insertExecutions(this.db, [{ task, data, idempotencyKey: cronKey(task, fireAt), startAt: fireAt }]);
    return { created: result.created, executionId: result.execution.id, task: result.execution.task };
  }

  claim(tasks: readonly ClaimTask[], limit: number, leaseMs: number, workerId: string) {
    // Handlers start while the claim's commit is being flushed (see claimExecutionsBeforeCommit).
    return claimExecutionsBeforeCommit(this.db, tasks, limit, leaseMs, workerId);
  }

  claimThrottled(served: ClaimTask, policy: FlowPolicy, want: number, leaseMs: number, workerId: string, cursor: string, runnable: number, completions: readonly Completion[]) {
    return claimThrottledExecutions(this.db, served, policy, want, leaseMs, workerId, cursor, runnable, completions);
  }

  completeAndClaim(items: readonly Completion[], tasks: readonly ClaimTask[], limit: number, leaseMs: number, workerId: string) {
    return completeAndClaimBeforeCommit(this.db, items, tasks, limit, leaseMs, workerId);
  }

  renewLeases(leases: readonly Lease[], leaseMs: number): Promise<Set<string>> {
    return renewLeases(this.db, leases, leaseMs);
  }

  release(leases: readonly Lease[]): Promise<Set<string>> {
    return releaseExecutions(this.db, leases);
  }

  returnUnstarted(items: readonly Unstarted[]): Promise<Set<string>> {
    return returnUnstarted(this.db, items);
  }

  loadReplayHistory(executionId: string) {
    return loadReplayHistory(this.db, executionId);
  }

  loadReplayRecords(executionId: string, seqs: readonly number[], fromSeq: number) {
    return loadReplayRecords(this.db, executionId, seqs, fromSeq);
  }

  recordStepResults(items: readonly StepResult[]): Promise<Set<string>> {
    return recordStepResults(this.db, items);
  }

  recordStepFailure(lease: Lease, failure: StepFailureRecord): Promise<boolean> {
    return recordStepFailure(this.db, lease, failure);
  }

  completeTimedStep(lease: Lease, seq: number, result: Record<string, unknown>): Promise<TimedCompletion> {
    return completeTimedStep(this.db, lease, seq, result);
  }

  setCurrentStep(lease: Lease, name: string): Promise<boolean> {
    return setCurrentStep(this.db, lease, name);
  }

  startChild(lease: Lease, child: NewChild): Promise<string | undefined> {
    return startChild(this.db, lease, child);
  }

  suspend(lease: Lease, waits: readonly Wait[], deadline: Date | null, currentStep: string, superseded: readonly Wait[]) {
    return suspendExecution(this.db, lease, waits, deadline, currentStep, superseded);
  }

  closeOpenWaits(lease: Lease, seqs: readonly number[]): Promise<boolean> {
    return closeOpenWaits(this.db, lease, seqs);
  }

  fail(lease: Lease, error: ExecutionError, retryDelayMs: number | null, parentId: string | null, attemptError: ExecutionError & { stack?: string }): Promise<boolean> {
    return failExecution(this.db, lease, error, retryDelayMs, parentId, attemptError);
  }
}
