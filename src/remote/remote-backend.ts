import type { components } from '../../generated/openapi';
import type { ChildChecker, ClaimAnswer, CronFire, HeartbeatAnswer, WorkerBackend, WorkSignalHandlers, WorkSignals } from '../engine/worker-backend';
import { NonRetryableError } from '../engine/errors';
import { GroupCommitter } from '../group-commit';
import type { Logger } from '../logger';
import type { NewChild } from '../store/children';
import { isDatabaseUnavailable } from '../store/db-errors';
import type { Lease } from '../store/leases';
import type { ExecutionError } from '../store/rows';
import { stepKey, type ReplayRecord, type StepFailureRecord, type StepResult, type TimedCompletion } from '../store/steps';
import type { TaskRegistration } from '../store/tasks';
import type { ClaimedExecution, ClaimTask, CompleteAndClaimResult } from '../store/transitions/claim';
import type { Completion } from '../store/transitions/complete';
import type { Unstarted } from '../store/transitions/release';
import type { Wait } from '../store/transitions/suspend';
import type { WorkerRegistration } from '../store/workers';
import { isLeaseLost, WorkerTransport, type AnswerOf, type BodyOf, type ItemError, type WorkerPath } from './transport';

type Schemas = components['schemas'];

/** How long a claim waits on the server for due executions before it is sent again. */
const CLAIM_WAIT_MS = 20_000;
/** Histories of claimed executions kept for their runs; past this the oldest go (a run then fails and is retried). */
const HISTORIES_KEPT = 50_000;
/** Histories a resume in this process read, kept in case it cannot resume and replays instead. */
const RESUMED_KEPT = 1024;

export interface RemoteBackendOptions {
  /** The API server's base URL, its base path included. */
  url: string;
  token?: string;
  log: Logger;
  /** For tests: a fetch of their own. */
  fetch?: typeof fetch;
  /** How long a claim waits on the server (20 s). */
  claimWaitMs?: number;
}

/** The lease-carrying fields every protocol item starts with. */
const leaseFields = (lease: Lease) => ({ execution_id: lease.id, lease_token: lease.token });

/**
 * A refused item that is no lease loss: the server would refuse it again, so it fails the operation
 * for good (a value over the server's limit).
 */
function refusal(r: ItemError): Error {
  return new NonRetryableError(`the API server refused the write (${r.error.code}): ${r.error.message}${r.error.details?.length ? `: ${r.error.details.map((d) => `${d.path} ${d.message}`).join('; ')}` : ''}`);
}

/**
 * The worker's port over an API server (the worker protocol, docs/worker-protocol.md): a worker built
 * with `remote: { url, token }` runs its handlers with no database access. Claims long-poll the
 * server, which fills the claims of all its workers together and applies flow control; writes of the
 * same kind issued in the same turn (or while one is in flight) go in one request, which the server
 * group-commits with those of its other workers. Cancels come with the lease renewals.
 */
export class RemoteWorkerBackend implements WorkerBackend {
  readonly claimWaits = true;
  /** The server checks a child's task and data when it starts it. */
  readonly children: ChildChecker = { check: async () => undefined };
  private readonly transport: WorkerTransport;
  private readonly claimWaitMs: number;
  private handlers: WorkSignalHandlers | undefined;
  private workerId: string | undefined;
  /** Handlers running, as the last heartbeat said: renewals report it too. */
  private running = 0;
  /** The registration's tasks as sent, for registering again (see register). */
  private tasks: Schemas['WorkerTask'][] = [];
  private claiming = new AbortController();
  /** The history each claimed execution came with, until its run reads it. */
  private readonly histories = new Map<string, ReplayRecord[]>();
  /** Those a resume read (loadReplayRecords): the run replays from one when the resume cannot go on. */
  private readonly resumed = new Map<string, ReplayRecord[]>();
  private readonly batchers = new Map<WorkerPath, GroupCommitter<unknown, unknown>>();

  constructor(private readonly options: RemoteBackendOptions) {
    this.transport = new WorkerTransport(options);
    this.claimWaitMs = options.claimWaitMs ?? CLAIM_WAIT_MS;
  }

  listen(handlers: WorkSignalHandlers): WorkSignals {
    this.handlers = handlers;
    // No LISTEN: work arrives by the claim's long-poll, cancels with the renewals.
    return { workSeq: 0, start: async () => undefined, stop: async () => undefined, run: async () => undefined };
  }

  isUnavailable(err: unknown): boolean {
    return isDatabaseUnavailable(err);
  }

  interruptClaims(): void {
    this.claiming.abort();
  }

  async register(worker: WorkerRegistration, tasks: readonly TaskRegistration[]): Promise<{ startedAt: Date; rekeyed: string[] }> {
    this.workerId = worker.id;
    if (tasks.length > 0) this.tasks = tasks.map(toWireTask);
    const answer = await this.transport.post('/api/v1/worker/register', {
      worker_id: worker.id,
      hostname: worker.hostname.slice(0, 255),
      pid: worker.pid,
      version: `stepwise ${worker.version}`,
      concurrency: worker.concurrency,
      lost_after_ms: Math.max(1000, Math.ceil(worker.lostAfterMs)),
      // Registering again after the row was forgotten: the tasks are not made current again.
      ...(tasks.length === 0 && worker.startedAt ? { started_at: worker.startedAt.toISOString() } : {}),
      tasks: this.tasks,
    });
    // The server keys the executions of tasks whose keys changed again itself, a while later.
    return { startedAt: new Date(answer.started_at), rekeyed: [] };
  }

  async rekeyExecutions(): Promise<void> {
    // Done by the API server (see register).
  }

  async heartbeat(workerId: string, running: number): Promise<HeartbeatAnswer> {
    this.running = running;
    const answer = await this.transport.post('/api/v1/worker/heartbeat', { worker_id: workerId, running });
    return { found: answer.registered, starting: answer.registered ? new Set(answer.starting) : undefined };
  }

  async markStopping(workerId: string, running: number): Promise<void> {
    await this.transport.post('/api/v1/worker/heartbeat', { worker_id: workerId, running, state: 'stopping' });
  }

  async deregister(workerId: string): Promise<void> {
    await this.transport.post('/api/v1/worker/heartbeat', { worker_id: workerId, running: 0, state: 'stopped' });
  }

  async forgetLostWorkers(): Promise<number> {
    // The API server forgets long-lost workers itself.
    return 0;
  }

  async startingTasks(): Promise<Set<string>> {
    const answer = await this.transport.post('/api/v1/worker/heartbeat', { worker_id: this.id(), running: this.running });
    return new Set(answer.starting);
  }

  async fireCron(task: string, data: unknown, fireAt: Date): Promise<CronFire> {
    const r = await this.submit('/api/v1/worker/cron-fires', { task, fire_at: fireAt.toISOString(), data });
    if (r.status !== 200) throw refusal(r);
    return { created: r.created, executionId: r.execution_id, task: r.task };
  }

  async claim(tasks: readonly ClaimTask[], limit: number, leaseMs: number, workerId: string, runnable: number): Promise<ClaimAnswer> {
    if (limit <= 0 || tasks.length === 0) return { claimed: [], committed: Promise.resolve() };
    if (this.claiming.signal.aborted) return { claimed: [], committed: Promise.resolve() };
    const sentAt = Date.now();
    let answer: AnswerOf<'/api/v1/worker/claim'>;
    try {
      answer = await this.transport.post(
        '/api/v1/worker/claim',
        {
          worker_id: workerId,
          tasks: tasks.map((t) => (typeof t === 'string' ? { name: t } : { name: t.name, version: t.version === '' ? null : t.version, starts_new: t.startsNew !== false })),
          max: Math.min(limit, 1000),
          slots: Math.max(0, Math.min(runnable, limit, 1000)),
          lease_ms: Math.max(1000, Math.round(leaseMs)),
          wait_ms: this.claimWaitMs,
        },
        this.claiming.signal,
      );
    } catch (err) {
      if ((err as Error).name === 'AbortError') return { claimed: [], committed: Promise.resolve() };
      throw err;
    }
    // The leases began when the server claimed, `waited_ms` after the request reached it: never before this.
    const leasedFrom = sentAt + answer.waited_ms;
    const claimed = answer.activations.map((a) => this.toClaimed(a, leasedFrom));
    return { claimed, committed: Promise.resolve(), leasedFrom, throttled: answer.throttled.length > 0 ? answer.throttled : undefined };
  }

  claimThrottled(): never {
    throw new Error('a remote worker claims limited tasks through the API server (claimWaits)');
  }

  async completeAndClaim(items: readonly Completion[]): Promise<CompleteAndClaimResult> {
    if (items.length === 0) return { completed: new Set(), claimed: [], committed: Promise.resolve() };
    // The worker group-commits its completions already: one request per flush.
    const answer = await this.transport.post('/api/v1/worker/complete', { items: items.map((c) => ({ ...leaseFields(c), output: c.output ?? null })) });
    const completed = new Set<string>();
    answer.results.forEach((r, i) => {
      if (r.status === 200) completed.add(items[i].id);
      else if (!isLeaseLost(r)) throw refusal(r);
    });
    return { completed, claimed: [], committed: Promise.resolve() };
  }

  async renewLeases(leases: readonly Lease[], leaseMs: number): Promise<Set<string>> {
    const answer = await this.transport.post('/api/v1/worker/heartbeat', {
      worker_id: this.id(),
      running: this.running,
      lease_ms: Math.max(1000, Math.round(leaseMs)),
      leases: leases.map(leaseFields),
    });
    // A cancel, heard here rather than by NOTIFY: the handler stops as it would on one.
    for (const lost of answer.lost) if (lost.reason === 'cancelled') this.handlers?.onCancel(lost.execution_id);
    return new Set(answer.renewed);
  }

  async release(leases: readonly Lease[]): Promise<Set<string>> {
    return this.releasing(leases.map((l) => leaseFields(l)));
  }

  async returnUnstarted(items: readonly Unstarted[]): Promise<Set<string>> {
    // Never started: nothing will read their histories.
    for (const i of items) this.histories.delete(i.id);
    return this.releasing(items.map((i) => ({ ...leaseFields(i), previous_status: i.previousStatus })));
  }

  private async releasing(items: BodyOf<'/api/v1/worker/release'>['items']): Promise<Set<string>> {
    if (items.length === 0) return new Set();
    const answer = await this.transport.post('/api/v1/worker/release', { items });
    return new Set(items.filter((_, i) => answer.results[i].status === 200).map((i) => i.execution_id));
  }

  async loadReplayHistory(executionId: string): Promise<ReplayRecord[]> {
    const history = this.histories.get(executionId) ?? this.resumed.get(executionId);
    if (!history) throw new Error(`the history of execution ${executionId} did not come with its claim`);
    this.histories.delete(executionId);
    this.resumed.delete(executionId);
    return history;
  }

  async loadReplayRecords(executionId: string, seqs: readonly number[], fromSeq: number): Promise<ReplayRecord[]> {
    const history = this.histories.get(executionId);
    if (!history) throw new Error(`the history of execution ${executionId} did not come with its claim`);
    this.histories.delete(executionId);
    this.resumed.set(executionId, history);
    if (this.resumed.size > RESUMED_KEPT) this.resumed.delete(this.resumed.keys().next().value as string);
    return history.filter((r) => seqs.includes(r.seq) || r.seq >= fromSeq);
  }

  async recordStepResults(items: readonly StepResult[]): Promise<Set<string>> {
    if (items.length === 0) return new Set();
    // The runner group-commits its steps already: one request per flush.
    const answer = await this.transport.post('/api/v1/worker/steps', {
      items: items.map((s) => ({ ...leaseFields(s), seq: s.seq, name: s.name, kind: s.kind ?? 'step', ...(s.result === undefined ? {} : { result: s.result }), started_at: s.startedAt.toISOString() })),
    });
    const landed = new Set<string>();
    answer.results.forEach((r, i) => {
      if (r.status === 200) landed.add(stepKey(items[i].id, items[i].seq));
      else if (!isLeaseLost(r)) throw refusal(r);
    });
    return landed;
  }

  async recordStepFailure(lease: Lease, f: StepFailureRecord): Promise<boolean> {
    const r = await this.submit('/api/v1/worker/step-failures', {
      ...leaseFields(lease),
      seq: f.seq,
      name: f.name,
      attempt: f.attempt,
      error: f.error as Schemas['ExecutionError'],
      started_at: f.startedAt.toISOString(),
      final: f.final,
      retry_at: f.retryAt ? f.retryAt.toISOString() : null,
    });
    return this.landed(r);
  }

  async completeTimedStep(lease: Lease, seq: number, result: Record<string, unknown>): Promise<TimedCompletion> {
    const r = await this.submit('/api/v1/worker/timeouts', { ...leaseFields(lease), seq, ends: result.slept ? 'sleep' : 'timeout' });
    if (r.status !== 200) {
      if (isLeaseLost(r)) return { kind: 'lost' };
      throw refusal(r);
    }
    return r.outcome === 'not_due' ? { kind: 'not_due' } : { kind: r.outcome, result: r.result };
  }

  async setCurrentStep(lease: Lease, name: string): Promise<boolean> {
    return this.landed(await this.submit('/api/v1/worker/current-steps', { ...leaseFields(lease), name }));
  }

  async startChild(lease: Lease, child: NewChild): Promise<string | undefined> {
    const r = await this.submit('/api/v1/worker/children', {
      ...leaseFields(lease),
      seq: child.seq,
      name: child.name,
      task: child.task,
      data: child.data ?? null,
      ...(child.startAt ? { start_at: child.startAt.toISOString() } : {}),
      detached: child.detached,
      ...(child.timeoutMs === undefined ? {} : { timeout_ms: child.timeoutMs }),
      ...(child.priority === undefined ? {} : { priority: child.priority }),
      ...(child.traceparent === undefined ? {} : { traceparent: child.traceparent }),
    });
    if (r.status === 200) return r.child_execution_id;
    if (isLeaseLost(r)) return undefined;
    // As a worker with a database fails them (ChildTaskChecker): a task nobody registered may come (retried); data that fails its schema never will.
    if (r.error.code === 'task_not_registered') throw new Error(`cannot start a child execution of task ${JSON.stringify(child.task)}: no worker has registered it`);
    if (r.error.code === 'invalid_data') throw new NonRetryableError(r.error.message);
    throw refusal(r);
  }

  async suspend(lease: Lease, waits: readonly Wait[], deadline: Date | null, _currentStep: string, superseded: readonly Wait[]) {
    const r = await this.submit('/api/v1/worker/suspend', {
      ...leaseFields(lease),
      waits: waits.map((w) => ({ seq: w.seq, name: w.name, kind: w.kind, ...(w.eventName === undefined ? {} : { event_name: w.eventName }), wake_at: w.wakeAt ? w.wakeAt.toISOString() : null })),
      superseded: superseded.map((w) => ({ seq: w.seq, name: w.name, event_name: w.eventName as string })),
      deadline: deadline ? deadline.toISOString() : null,
    });
    if (r.status !== 200) {
      if (isLeaseLost(r)) return undefined;
      throw refusal(r);
    }
    return { wakeAt: r.wake_at ? new Date(r.wake_at) : null, dueInMs: r.due_in_ms };
  }

  async closeOpenWaits(lease: Lease, seqs: readonly number[]): Promise<boolean> {
    return this.landed(await this.submit('/api/v1/worker/closed-waits', { ...leaseFields(lease), seqs: [...seqs] }));
  }

  async fail(lease: Lease, error: ExecutionError, retryDelayMs: number | null, _parentId: string | null, attemptError: ExecutionError & { stack?: string }): Promise<boolean> {
    const r = await this.submit('/api/v1/worker/fail', {
      ...leaseFields(lease),
      error: error as Schemas['ExecutionError'],
      retry_in_ms: retryDelayMs === null ? null : Math.max(0, Math.round(retryDelayMs)),
      ...(attemptError.stack ? { stack: attemptError.stack.slice(0, 65536) } : {}),
    });
    return this.landed(r);
  }

  private id(): string {
    if (this.workerId === undefined) throw new Error('the remote worker is not registered yet');
    return this.workerId;
  }

  /** True when written, false when its lease was lost; a refusal of another kind throws. */
  private landed(r: { status: number }): boolean {
    if (r.status === 200) return true;
    if (isLeaseLost(r)) return false;
    throw refusal(r as ItemError);
  }

  /**
   * Sends one item of a batch operation. Items of the same operation submitted in the same turn, or
   * while a request of it is in flight, go together in the next request (see GroupCommitter).
   */
  private submit<P extends BatchPath>(path: P, item: ItemOf<P>): Promise<ResultOf<P>> {
    let batcher = this.batchers.get(path);
    if (!batcher) {
      const flush = async (items: unknown[]) => (await this.transport.post(path, { items } as BodyOf<P>)).results as unknown[];
      batcher = new GroupCommitter(flush, isDatabaseUnavailable, { maxBatch: 500 });
      this.batchers.set(path, batcher);
    }
    return batcher.submit(item) as Promise<ResultOf<P>>;
  }

  private toClaimed(a: Schemas['Activation'], leasedFrom: number): ClaimedExecution {
    this.histories.set(a.execution_id, a.history.map(toReplayRecord));
    if (this.histories.size > HISTORIES_KEPT) this.histories.delete(this.histories.keys().next().value as string);
    const scheduledFor = new Date(a.scheduled_for);
    return {
      execution: {
        id: a.execution_id,
        task: a.task,
        status: 'running',
        data: a.data,
        attempt: a.attempt,
        attemptsSinceProgress: a.attempts_since_progress,
        stepsCompleted: a.steps_completed,
        leaseToken: a.lease_token,
        parentId: a.parent_execution_id,
        traceparent: a.traceparent,
      },
      previousStatus: a.previous_status,
      claimedAt: new Date(a.claimed_at),
      claimedLocally: leasedFrom,
      readyAt: scheduledFor,
      startedAt: new Date(a.started_at),
      scheduledFor,
    };
  }
}

/** The batch operations, and the item and result types of each. */
type BatchPath = {
  [P in WorkerPath]: BodyOf<P> extends { items: unknown[] } ? P : never;
}[WorkerPath];
type ItemOf<P extends BatchPath> = BodyOf<P> extends { items: Array<infer I> } ? I : never;
type ResultOf<P extends BatchPath> = AnswerOf<P> extends { results: Array<infer R> } ? R : never;

function toReplayRecord(op: Schemas['RecordedOperation']): ReplayRecord {
  return {
    seq: op.seq,
    name: op.name,
    kind: op.kind,
    completed: op.completed,
    // Absent: the step returned nothing; null is the JSON value null.
    result: 'result' in op ? op.result : undefined,
    wakeAt: op.wake_at ? new Date(op.wake_at) : null,
    startedAt: new Date(op.started_at),
    outcome: op.outcome as ReplayRecord['outcome'],
    error: op.error as ReplayRecord['error'],
    failures: op.failures as ReplayRecord['failures'],
    attemptBase: op.attempt_base,
    endedAt: op.ended_at_us,
  };
}

/** A task's registration as the protocol sends it. */
function toWireTask(t: TaskRegistration): Schemas['WorkerTask'] {
  const retry = t.retry as { maxAttempts: number; initialDelayMs: number; maxDelayMs: number; factor: number } | null;
  const flow = t.flow;
  return {
    name: t.name,
    version: t.version ? t.version : null,
    data_schema: t.dataSchema ?? null,
    event_schemas: t.eventSchemas ?? {},
    ...(retry ? { retry: { max_attempts: retry.maxAttempts, initial_delay_ms: retry.initialDelayMs, max_delay_ms: retry.maxDelayMs, factor: retry.factor } } : {}),
    cron: t.cron ? { pattern: t.cron.pattern, timezone: t.cron.timezone } : null,
    concurrency: flow?.concurrency ? { limit: flow.concurrency.limit, key: flow.concurrency.key?.pointer ?? null } : null,
    rate_limit: flow?.rateLimit ? { limit: flow.rateLimit.limit, period_ms: flow.rateLimit.periodMs, key: flow.rateLimit.key?.pointer ?? null } : null,
    debounce: flow?.debounce ? { period_ms: flow.debounce.periodMs, key: flow.debounce.key?.pointer ?? null } : null,
  };
}
