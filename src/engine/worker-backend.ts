// The worker's port: every write and read a worker makes during its life, behind one interface. The
// direct backend (direct-backend.ts) runs them as statements on the database; the remote one
// (src/remote) sends them to an API server over the worker protocol. The engine uses only this.
import type { FlowPolicy } from '../domain/flow';
import type { Logger } from '../logger';
import type { NewChild } from '../store/children';
import type { Lease } from '../store/leases';
import type { ExecutionError } from '../store/rows';
import type { ReplayRecord, StepFailureRecord, StepResult, TimedCompletion } from '../store/steps';
import type { TaskRegistration } from '../store/tasks';
import type { ClaimedExecution, ClaimTask, CompleteAndClaimResult } from '../store/transitions/claim';
import type { ThrottledClaim } from '../store/transitions/claim-throttled';
import type { Completion } from '../store/transitions/complete';
import type { Unstarted } from '../store/transitions/release';
import type { Wait } from '../store/transitions/suspend';
import type { WorkerRegistration } from '../store/workers';

/** What a worker is told between its claims: work announced, cancels, registrations, streams. */
export interface WorkSignalHandlers {
  /** True for a task this worker serves: work announced for other tasks does not wake it. */
  serves: (task: string) => boolean;
  onWork: () => void;
  /** Work on a task this worker serves comes due in `delayMs` (a delayed start). */
  onWorkIn?: (delayMs: number) => void;
  onCancel: (executionId: string) => void;
  /** A task this worker serves was registered again (another worker started, maybe of another version). */
  onTaskRegistered?: (task: string) => void;
  /** An API server holds execution streams. */
  onStreams?: () => void;
  /** The signals flow (at start, or again): any sent while they did not are lost. */
  onListening?: () => void;
}

/** Where a worker's signals come from: a LISTEN connection (direct), or nowhere but its own calls (remote). */
export interface WorkSignals {
  /** Counts work announced, so a claim can tell whether some arrived while it ran. */
  readonly workSeq: number;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Sends a statement on the signals' connection (progress announcements); direct mode only. */
  run(sql: string): Promise<void>;
}

/** A claim's answer: the executions and when their claim commits. */
export interface ClaimAnswer {
  claimed: ClaimedExecution[];
  /** Settles (never rejects for the caller's sake: see the worker) when the claim has committed. */
  committed: Promise<void>;
  /**
   * The local instant the leases count from, when later than the instant the claim was sent: a claim
   * that waited for work (remote) took its executions only at the end of its wait.
   */
  leasedFrom?: number;
  /** Tasks of which due executions were left behind by their concurrency or rate limit (remote). */
  throttled?: ReadonlyArray<{ task: string; limit: 'concurrency' | 'rate' }>;
}

/** Checks a child execution's task and data before a handler starts it. */
export interface ChildChecker {
  check(task: string, data: unknown): Promise<void>;
}

/** What scheduling a cron fire time found: the execution it made, or the one already there. */
export interface CronFire {
  created: boolean;
  executionId: string;
  /** The task of the execution holding the fire time's key (another task's, when a key collides). */
  task: string;
}

/** A worker's heartbeat answer: whether its registration is still known, and which tasks it starts new executions of. */
export interface HeartbeatAnswer {
  found: boolean;
  starting?: Set<string>;
}

/**
 * Every operation a worker performs on the shared state, each fenced by its lease where it writes
 * an execution. Implementations answer as the store does: a write whose lease is lost reports it
 * (false, undefined, or an id missing from the returned set) and changes nothing; an error for which
 * `isUnavailable` holds is waited out by the engine until the lease's end.
 */
export interface WorkerBackend {
  /**
   * True when a claim waits on the other side until work is due (a long-poll), and flow control is
   * applied there: the worker then claims all its tasks in one call, claims again at once after a
   * short answer, and its completions claim nothing.
   */
  readonly claimWaits: boolean;
  /** Starts the flow of signals for a worker; the handlers are called as they come. */
  listen(handlers: WorkSignalHandlers, log: Logger): WorkSignals;
  /** Errors to wait out (the other side is unreachable), as opposed to a write's own failure. */
  isUnavailable(err: unknown): boolean;
  /** Interrupts claims waiting for work: they answer with nothing. The worker is stopping. */
  interruptClaims(): void;

  /**
   * Registers the worker (its row in the registry) and then its tasks (which makes their versions
   * current); `tasks` is empty when it registers again after its row was forgotten. `rekeyed`: tasks
   * whose keys changed, to key again later (rekeyExecutions).
   */
  register(worker: WorkerRegistration, tasks: readonly TaskRegistration[]): Promise<{ startedAt: Date; rekeyed: string[] }>;
  rekeyExecutions(tasks: readonly string[]): Promise<void>;
  /** A heartbeat; with `served`, it also reads which of those tasks the worker starts new executions of. */
  heartbeat(workerId: string, running: number, served: ReadonlyArray<{ name: string; version: string }> | undefined): Promise<HeartbeatAnswer>;
  markStopping(workerId: string, running: number): Promise<void>;
  deregister(workerId: string): Promise<void>;
  forgetLostWorkers(afterMs: number): Promise<number>;
  /** Which of `served` the worker starts new executions of (see startingTasks). */
  startingTasks(served: ReadonlyArray<{ name: string; version: string }>): Promise<Set<string>>;
  /** Schedules a cron fire time (once over all workers: its key). */
  fireCron(task: string, data: unknown, fireAt: Date): Promise<CronFire>;

  /** Claims up to `limit` due executions of `tasks`; `runnable` of them could start at once (free slots). */
  claim(tasks: readonly ClaimTask[], limit: number, leaseMs: number, workerId: string, runnable: number): Promise<ClaimAnswer>;
  /** A claim of one task with a concurrency or rate limit, with completions in the same transaction. */
  claimThrottled(served: ClaimTask, policy: FlowPolicy, want: number, leaseMs: number, workerId: string, cursor: string, runnable: number, completions: readonly Completion[]): Promise<ThrottledClaim>;
  /** Completions, and a claim of up to `limit` in the same statement (none when `claimWaits`). */
  completeAndClaim(items: readonly Completion[], tasks: readonly ClaimTask[], limit: number, leaseMs: number, workerId: string): Promise<CompleteAndClaimResult>;
  /** Extends the leases still held; returns their ids. */
  renewLeases(leases: readonly Lease[], leaseMs: number): Promise<Set<string>>;
  /** Hands executions back at shutdown; returns the ids released. */
  release(leases: readonly Lease[]): Promise<Set<string>>;
  /** Undoes claims whose handlers never started; returns the ids returned. */
  returnUnstarted(items: readonly Unstarted[]): Promise<Set<string>>;

  /** The history a replay walks, for an execution just claimed. */
  loadReplayHistory(executionId: string): Promise<ReplayRecord[]>;
  /** The rows a resume in this process needs (see loadReplayRecords in the store). */
  loadReplayRecords(executionId: string, seqs: readonly number[], fromSeq: number): Promise<ReplayRecord[]>;
  /** Completed steps and patch markers of any number of executions; returns the keys (stepKey) that landed. */
  recordStepResults(items: readonly StepResult[]): Promise<Set<string>>;
  recordStepFailure(lease: Lease, failure: StepFailureRecord): Promise<boolean>;
  /** Finishes a sleep whose time came, or a wait whose deadline passed. */
  completeTimedStep(lease: Lease, seq: number, result: Record<string, unknown>): Promise<TimedCompletion>;
  setCurrentStep(lease: Lease, name: string): Promise<boolean>;
  /** Starts a child execution with the step recording it; its id, or undefined when the lease was lost. */
  startChild(lease: Lease, child: NewChild): Promise<string | undefined>;
  readonly children: ChildChecker;
  suspend(lease: Lease, waits: readonly Wait[], deadline: Date | null, currentStep: string, superseded: readonly Wait[]): Promise<{ wakeAt: Date | null; dueInMs: number | null } | undefined>;
  closeOpenWaits(lease: Lease, seqs: readonly number[]): Promise<boolean>;
  /** Fails the attempt: retried after `retryDelayMs`, or for good when null. */
  fail(lease: Lease, error: ExecutionError, retryDelayMs: number | null, parentId: string | null, attemptError: ExecutionError & { stack?: string }): Promise<boolean>;
}
