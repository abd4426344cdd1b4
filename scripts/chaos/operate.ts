// The operator's part of `make chaos`: retries of failed and cancelled executions (one at a time, several
// at once, one racing a cancel), bulk retries of a tagged group, and pauses of a task. It records what it
// sent and what came back for verify-operate.ts to judge; it judges nothing itself, but notes answers
// the contract rules out.
import { StepwiseApiError, type Attempt, type BulkResult, type Execution, type StepwiseClient } from '../../src/client';
import type { PlannedExecution } from './outcomes';
import type { BulkGroupPlan } from './plan-operate';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the operator needs of the driver: its client, its retrying of transient failures, its waits. */
export interface DriverAccess {
  client: StepwiseClient;
  retrying<T>(fn: () => Promise<T>): Promise<T>;
  waitForEnd(id: string): Promise<Execution>;
  deliver(id: string, plan: PlannedExecution): Promise<void>;
  /** Epoch ms after which flows give up. */
  deadline: number;
}

/** What the operator did to one execution, and what it saw. */
export interface OperatedExecution {
  /** Epoch ms the first retry (single or bulk) was sent: no step that completed before may run again. */
  firstRetryAt?: number;
  /** Retries sent and how they were answered. */
  retries: Tally;
  /** The batch of concurrent retries, when its plan asked for one. */
  concurrent?: Tally;
  /** Cancels that were answered 200 (the one of a cancel-retry, one that won its race with a retry). */
  cancelsWon: number;
  /** Answers the contract rules out (a retry of a failed execution answered 409, two winners...). */
  unexpected: string[];
  /** Its attempts as GET …/attempts showed them once it had ended. */
  attempts?: Attempt[];
}

/**
 * Requests and their answers. `unsure` counts requests sent again after a network error or a 503: the
 * answer of an earlier try may have been lost (a 409 then may be our own earlier success).
 */
export interface Tally {
  sent: number;
  ok: number;
  conflicts: number;
  unsure: number;
}

/** One POST …/bulk-retry as the driver sent it. */
export interface BulkAction {
  tag: string;
  /** Members planned, and those the driver saw failed before the action. */
  members: number;
  failedMembers: number;
  withStatus: boolean;
  atMs: number;
  result?: BulkResult;
  unsure: boolean;
  error?: string;
}

/** One pause of a task: from the pause's answer to the resume's request (epoch ms), nothing may start. */
export interface PauseWindow {
  task: string;
  pausedAt: number;
  resumeSentAt: number;
  resumedAt: number;
  /** Its executions pending just before the resume (GET /executions?task=…&status=pending). */
  pendingAtResume: number;
}

export interface OperatorStats {
  retries: Tally;
  concurrentBatches: number;
  cancelRaces: number;
  cancelRacesWon: number;
  bulkActions: BulkAction[];
  pauses: PauseWindow[];
}

const newTally = (): Tally => ({ sent: 0, ok: 0, conflicts: 0, unsure: 0 });
const TERMINAL = ['completed', 'failed', 'cancelled'];

/** Waits until every member of a bulk group has arrived (failed, or given up), then sends its action once. */
class BulkGroup {
  private arrived = 0;
  private failed = 0;
  private fire!: () => void;
  readonly done: Promise<BulkAction>;

  constructor(
    readonly plan: BulkGroupPlan,
    act: (failedMembers: number) => Promise<BulkAction>,
  ) {
    this.done = new Promise<void>((resolve) => (this.fire = resolve)).then(() => act(this.failed));
  }

  arrive(failed: boolean): void {
    this.arrived += 1;
    if (failed) this.failed += 1;
    if (this.arrived === this.plan.size) this.fire();
  }
}

/** The operator's flows for the operator kinds, and the pauses. */
export class Operator {
  readonly stats: OperatorStats = { retries: newTally(), concurrentBatches: 0, cancelRaces: 0, cancelRacesWon: 0, bulkActions: [], pauses: [] };
  private readonly groups = new Map<string, BulkGroup>();

  constructor(private readonly driver: DriverAccess) {}

  /** Drives an execution of an operator kind from its schedule to its end. */
  async drive(id: string, plan: PlannedExecution, record: OperatedExecution): Promise<Execution> {
    try {
      if (plan.kind === 'retry') return await this.retryAfterFailures(id, plan, record);
      if (plan.kind === 'bulk-retry') return await this.retryInBulk(id, plan, record);
      return await this.retryAfterCancel(id, plan, record);
    } finally {
      record.attempts = await this.driver.retrying(() => this.driver.client.listAttempts(id)).catch(() => undefined);
    }
  }

  static newRecord(): OperatedExecution {
    return { retries: newTally(), cancelsWon: 0, unexpected: [] };
  }

  /** `retry`: after each failed run, a retry; the last one single, concurrent or racing a cancel. */
  private async retryAfterFailures(id: string, plan: PlannedExecution, record: OperatedExecution): Promise<Execution> {
    const rounds = plan.operatorRounds ?? 1;
    let final = await this.driver.waitForEnd(id);
    for (let round = 1; round <= rounds; round++) {
      // A retry whose answer was lost (an API kill) is sent again, and the copy may land after the
      // next run failed: it is then that run's retry, and the execution completes a round early.
      if (final.status === 'completed' && round > 1 && record.retries.unsure > 0) return final;
      if (final.status !== 'failed') {
        record.unexpected.push(`ended ${final.status} before retry ${round} of ${rounds}, expected failed`);
        return final;
      }
      const mode = round === rounds ? (plan.retryMode ?? 'single') : 'single';
      if (mode === 'concurrent') await this.retryConcurrently(id, plan.concurrentRetries ?? 2, record);
      else if (mode === 'race-cancel') await this.retryRacingCancel(id, record);
      else await this.retryOnce(id, record);
      final = await this.driver.waitForEnd(id);
    }
    // A cancel that won its race cut the last run short: retry it again (bounded: each cancel was one).
    for (let i = 0; final.status === 'cancelled' && i < 3; i++) {
      await this.retryOnce(id, record);
      final = await this.driver.waitForEnd(id);
    }
    return final;
  }

  /** `cancel-retry`: cancelled while it waits for `go`, retried (once or several at once), then `go`. */
  private async retryAfterCancel(id: string, plan: PlannedExecution, record: OperatedExecution): Promise<Execution> {
    if (!(await this.waitUntilWaitingFor(id, 'go'))) {
      record.unexpected.push('ended before it waited for go');
      return this.driver.waitForEnd(id);
    }
    const cancel = await this.send(() => this.driver.client.cancel(id), 'execution_not_cancellable');
    if (cancel.ok) record.cancelsWon += 1;
    else if (!cancel.unsure) record.unexpected.push('the cancel of a waiting execution answered 409');
    const cancelled = await this.driver.waitForEnd(id);
    if (cancelled.status !== 'cancelled') {
      record.unexpected.push(`ended ${cancelled.status} after its cancel`);
      return cancelled;
    }
    if (plan.retryMode === 'concurrent') await this.retryConcurrently(id, plan.concurrentRetries ?? 2, record);
    else await this.retryOnce(id, record);
    await this.driver.deliver(id, plan);
    return this.driver.waitForEnd(id);
  }

  /** `bulk-retry`: fails, then waits for its group's bulk action to retry it. */
  private async retryInBulk(id: string, plan: PlannedExecution, record: OperatedExecution): Promise<Execution> {
    const group = this.group(plan.bulkGroup ?? { tag: `${plan.idempotencyKey}-bulk`, size: 1, withStatus: true });
    let failed: Execution | undefined;
    try {
      failed = await this.driver.waitForEnd(id);
    } finally {
      group.arrive(failed?.status === 'failed');
    }
    if (failed.status !== 'failed') {
      record.unexpected.push(`ended ${failed.status} before its bulk retry, expected failed`);
      return failed;
    }
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, Math.max(0, this.driver.deadline - Date.now()), undefined)));
    const action = await Promise.race([group.done, deadline]).finally(() => clearTimeout(timer));
    if (!action) throw new Error(`deadline passed before bulk group ${group.plan.tag} acted`);
    record.firstRetryAt = action.atMs;
    const final = await this.driver.waitForEnd(id);
    if (final.status === 'failed') record.unexpected.push(`still failed after bulk retry ${action.tag} (${JSON.stringify(action.result ?? action.error)})`);
    return final;
  }

  private group(plan: BulkGroupPlan): BulkGroup {
    let group = this.groups.get(plan.tag);
    if (!group) {
      group = new BulkGroup(plan, (failedMembers) => this.bulkRetry(plan, failedMembers));
      this.groups.set(plan.tag, group);
    }
    return group;
  }

  private async bulkRetry(plan: BulkGroupPlan, failedMembers: number): Promise<BulkAction> {
    const action: BulkAction = { tag: plan.tag, members: plan.size, failedMembers, withStatus: plan.withStatus, atMs: Date.now(), unsure: false };
    try {
      const sent = await this.send(() => this.driver.client.bulkRetry({ tag: [plan.tag], ...(plan.withStatus ? { status: 'failed' as const } : {}) }), undefined);
      action.result = sent.value;
      action.unsure = sent.unsure;
    } catch (err) {
      action.error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    }
    this.stats.bulkActions.push(action);
    return action;
  }

  /** One retry of an execution that is failed or cancelled now: it must win, unless an answer was lost. */
  private async retryOnce(id: string, record: OperatedExecution): Promise<void> {
    record.firstRetryAt ??= Date.now();
    const answer = await this.sendRetry(id, record);
    this.count(answer, record.retries);
    if (!answer.ok && !answer.unsure) record.unexpected.push('a retry of a failed or cancelled execution answered 409');
  }

  /**
   * `n` retries at once of an execution that cannot fail or be cancelled again once retried: exactly
   * one wins and the others are answered 409, or, when an answer may have been lost, at most one.
   */
  private async retryConcurrently(id: string, n: number, record: OperatedExecution): Promise<void> {
    record.firstRetryAt ??= Date.now();
    this.stats.concurrentBatches += 1;
    const answers = await Promise.all(Array.from({ length: n }, () => this.sendRetry(id, record)));
    const batch = newTally();
    for (const a of answers) this.count(a, batch, record.retries);
    record.concurrent = batch;
    const wins = batch.ok;
    if (batch.unsure === 0 ? wins !== 1 : wins > 1) record.unexpected.push(`of ${n} concurrent retries ${wins} won (${batch.unsure} sent again), expected exactly one`);
  }

  /** A retry and a cancel at once, of a failed execution: the retry wins (a failed one cannot be cancelled). */
  private async retryRacingCancel(id: string, record: OperatedExecution): Promise<void> {
    record.firstRetryAt ??= Date.now();
    this.stats.cancelRaces += 1;
    const [retry, cancel] = await Promise.all([
      this.sendRetry(id, record),
      this.send(() => this.driver.client.cancel(id), 'execution_not_cancellable'),
    ]);
    this.count(retry, record.retries);
    if (!retry.ok && !retry.unsure) record.unexpected.push('a retry racing a cancel answered 409');
    if (cancel.ok) {
      record.cancelsWon += 1;
      this.stats.cancelRacesWon += 1;
    }
  }

  /** POST …/retry; a 200 must answer RetriedExecution for this execution, pending. */
  private async sendRetry(id: string, record: OperatedExecution): Promise<{ ok: boolean; unsure: boolean }> {
    const answer = await this.send(() => this.driver.client.retry(id), 'execution_not_retryable');
    if (answer.ok && !(answer.value?.execution_id === id && answer.value.status === 'pending')) record.unexpected.push(`a retry answered 200 with ${JSON.stringify(answer.value)}`);
    return answer;
  }

  /** Counts a retry's answer in the run's tally and in the given ones. */
  private count(answer: { ok: boolean; unsure: boolean }, ...tallies: Tally[]): void {
    for (const tally of [this.stats.retries, ...tallies]) {
      tally.sent += 1;
      if (answer.ok) tally.ok += 1;
      else tally.conflicts += 1;
      if (answer.unsure) tally.unsure += 1;
    }
  }

  /** Sends a request through the driver's retrying; a 409 with `conflictCode` is an answer, not an error. */
  private async send<T>(fn: () => Promise<T>, conflictCode: string | undefined): Promise<{ ok: boolean; unsure: boolean; value?: T }> {
    let tries = 0;
    try {
      const value = await this.driver.retrying(() => {
        tries += 1;
        return fn();
      });
      return { ok: true, unsure: tries > 1, value };
    } catch (err) {
      if (conflictCode !== undefined && err instanceof StepwiseApiError && err.code === conflictCode) return { ok: false, unsure: tries > 1 };
      throw err;
    }
  }

  /** Polls until the execution waits for `event` (true) or has ended (false). */
  private async waitUntilWaitingFor(id: string, event: string): Promise<boolean> {
    for (;;) {
      if (Date.now() > this.driver.deadline) throw new Error(`deadline passed before ${id} waited for ${event}`);
      const current = await this.driver.retrying(() => this.driver.client.get(id));
      if (TERMINAL.includes(current.status)) return false;
      if (current.status === 'waiting' && current.waiting_for_events.some((w) => w.event_name === event)) return true;
      await sleep(100 + Math.random() * 150);
    }
  }

  /**
   * Pauses `task` for `ms`, then resumes it (the resume is retried until it lands: a task left paused
   * would strand its executions). Counts the task's pending executions just before the resume.
   */
  async pauseFor(task: string, ms: number): Promise<PauseWindow> {
    const { client, retrying } = this.driver;
    await retrying(() => client.pauseTask(task));
    const pausedAt = Date.now();
    await sleep(ms);
    const pendingAtResume = await retrying(() => client.list({ task, status: 'pending', limit: 1 }))
      .then((page) => page.total)
      .catch(() => -1);
    const resumeSentAt = Date.now();
    for (let backoff = 200; ; backoff = Math.min(backoff * 2, 2000)) {
      try {
        await retrying(() => client.resumeTask(task));
        break;
      } catch {
        await sleep(backoff);
      }
    }
    const window: PauseWindow = { task, pausedAt, resumeSentAt, resumedAt: Date.now(), pendingAtResume };
    this.stats.pauses.push(window);
    return window;
  }
}
