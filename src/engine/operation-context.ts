// The options a durable context is made with, and what its step and child helpers see of it: apart
// from the context itself, so that the helpers it uses need not import it.
import type { ResolvedRetryPolicy } from '../domain/retry';
import type { Logger } from '../logger';
import type { Lease } from '../store/leases';
import type { StepKind } from '../store/rows';
import type { ReplayRecord, StepResult } from '../store/steps';
import type { AttemptTrace } from '../telemetry/tracing';
import type { LazyAbortController } from './abort';
import type { Suspension } from './suspension';
import type { ChildChecker, WorkerBackend } from './worker-backend';

export interface DurableContextOptions {
  /** Where the context's writes go: the database, or an API server. */
  backend: WorkerBackend;
  lease: Lease;
  attempt: number;
  /** ctx.scheduledFor: the execution's start_at, else when it was scheduled. */
  scheduledFor: Date;
  history: readonly ReplayRecord[];
  /** The database clock at the claim, and the local clock when the claim answered. */
  claimedAt: Date;
  claimedLocally: number;
  /** Stops the execution: cancelled, timed out, lease lost or worker stopping. ctx.signal is its signal. */
  abort: LazyAbortController;
  /** The execution's logger, made on first use (a child logger per execution is not free). */
  log: () => Logger;
  /** Until when fenced writes may be retried through a database outage (the lease's end). */
  writeDeadline: () => number;
  /**
   * Settles once the claim has committed (never rejects): a fenced write sent before that would not
   * see the lease and be discarded, so every write waits for it.
   */
  claimCommitted?: Promise<void>;
  /** Records a completed step durably; resolves false when the lease was lost (group-committed). */
  recordStep: (step: StepResult) => Promise<boolean>;
  /** Checks a child execution's task and data before it is started. */
  children: ChildChecker;
  /** The task's retry policy: each step's, unless the step has its own. */
  retry: ResolvedRetryPolicy;
  /** Largest JSON of a step's result, in bytes; most durable operations in one execution. */
  limits: { valueBytes: number; operations: number };
  /** The task's timeout as an instant (from the first claim), or null: a suspension is due by then. */
  deadline: Date | null;
  onStep?: (name: string, kind: StepKind, durationMs: number) => void;
  /** The execution moved on within its status (a step recorded, a sleep ended, a long step named): API servers are told, apart from the write. */
  progressed?: () => void;
  /** The span of this claim's run, parent of its steps' spans; undefined when tracing is off. */
  trace?: AttemptTrace;
}

/** What a step or child helper needs of its context, bound to the current claim. */
export interface OperationContext extends DurableContextOptions {
  write<T>(fn: () => Promise<T>): Promise<T>;
  suspension: Suspension;
  databaseNow(): number;
  throwIfAborted(): void;
}
