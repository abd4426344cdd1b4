// The client side of `make chaos`: schedules the planned executions over HTTP, delivers their events,
// cancels some, and long-polls each to its end, retrying through every fault (a killed API server,
// a restarting database) the way a careful client would. The operator kinds (retries, bulk retries)
// are driven by operate.ts.
import { createStepwiseClient, StepwiseApiError, type Execution, type Step, type StepwiseClient } from '../../src/client';
import { Operator, type OperatedExecution } from './operate';
import { approvalPayload, eventPayload, goPayload, nthName, OPERATOR_KINDS, PARALLEL_EVENTS, parallelEventPayload, retriedSteps, type PlannedExecution } from './outcomes';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the driver saw for one execution. */
export interface DrivenResult {
  plan: PlannedExecution;
  id?: string;
  final?: Execution;
  /** The driver could not finish it (gave up retrying, or the run's deadline passed). */
  problem?: string;
  /** From the schedule request to the answer of the long-poll that saw it end. */
  latencyMs?: number;
  /** For kinds with retried steps: its steps as `GET …/steps` showed them once it had ended. */
  steps?: Step[];
  /** For the operator kinds: the retries and cancels sent, their answers, and its attempts. */
  operated?: OperatedExecution;
  /** For `reminder`: whether its `approval` delivery was answered 200, the round open just before, and how long the answer took. */
  approval?: ApprovalRecord;
}

export interface ApprovalRecord {
  acked: boolean;
  seenRound?: number;
  sendMs?: number;
}

export interface DriverStats {
  scheduled: number;
  /** Schedule answers of 200 (the idempotency key already existed: a retry after a lost answer). */
  scheduleRepeats: number;
  eventsDelivered: number;
  /** Deliveries answered 409 and tried again (an execution waiting for two events runs between them). */
  eventConflicts: number;
  cancelsSent: number;
  /** Requests retried after a network error or a 503. */
  retries: number;
  /** Long-polls open right now. */
  openLongPolls: number;
  finished: number;
}

/** True for failures a client should retry: the server (or its database) is briefly away. */
function isTransient(err: unknown): boolean {
  if (err instanceof StepwiseApiError) return err.status === 503 || err.status === 502 || err.status === 504;
  return err instanceof TypeError || (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError'));
}

export class ChaosDriver {
  readonly stats: DriverStats = { scheduled: 0, scheduleRepeats: 0, eventsDelivered: 0, eventConflicts: 0, cancelsSent: 0, retries: 0, openLongPolls: 0, finished: 0 };
  private readonly client: StepwiseClient;
  /** Retries, bulk retries and pauses: the operator's requests, with stats of their own. */
  readonly operator: Operator;

  constructor(
    baseUrl: string,
    token: string,
    /** Epoch ms after which flows stop retrying. */
    private readonly deadline: number,
  ) {
    // Every request gets a timeout of its own (a killed server can leave a socket silent); long-polls get theirs.
    const timedFetch = (request: Request) => {
      const isWait = new URL(request.url).pathname.endsWith('/wait');
      return fetch(request, { signal: AbortSignal.timeout(isWait ? 45000 : 15000) });
    };
    this.client = createStepwiseClient({ baseUrl, token, fetch: timedFetch });
    this.operator = new Operator({
      client: this.client,
      retrying: (fn) => this.retrying(fn),
      waitForEnd: (id) => this.waitForEnd(id),
      deliver: (id, plan) => this.deliver(id, plan),
      deadline,
    });
  }

  /** Runs `fn` until it succeeds, retrying transient failures with jittered backoff (honouring Retry-After). */
  private async retrying<T>(fn: () => Promise<T>): Promise<T> {
    let backoff = 100;
    for (;;) {
      try {
        return await fn();
      } catch (err) {
        if (!isTransient(err) || Date.now() > this.deadline) throw err;
        this.stats.retries += 1;
        const hinted = err instanceof StepwiseApiError && err.retryAfterSeconds !== undefined ? err.retryAfterSeconds * 1000 : backoff;
        await sleep(Math.min(hinted, backoff) * (0.5 + Math.random() / 2));
        backoff = Math.min(backoff * 2, 2000);
      }
    }
  }

  /** Drives every planned execution with at most `concurrency` in flight. */
  async run(plans: readonly PlannedExecution[], concurrency: number): Promise<DrivenResult[]> {
    const results: DrivenResult[] = new Array(plans.length);
    let next = 0;
    const lane = async () => {
      while (next < plans.length) {
        const plan = plans[next++];
        results[plan.index] = await this.drive(plan);
        this.stats.finished += 1;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, lane));
    return results;
  }

  /** Keeps `concurrency` flows busy with fresh plans from `nextPlan` until `untilMs` (epoch ms); for steady load. */
  async runUntil(nextPlan: (index: number) => PlannedExecution, concurrency: number, untilMs: number): Promise<DrivenResult[]> {
    const results: DrivenResult[] = [];
    let index = 0;
    const lane = async () => {
      while (Date.now() < untilMs) {
        results.push(await this.drive(nextPlan(index++)));
        this.stats.finished += 1;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, lane));
    return results;
  }

  private async drive(plan: PlannedExecution): Promise<DrivenResult> {
    const result: DrivenResult = { plan };
    const started = Date.now();
    try {
      const startAt = () => (plan.startAfterMs === undefined ? undefined : new Date(Date.now() + plan.startAfterMs));
      const scheduled = await this.retrying(() => this.client.schedule(plan.task, plan.data, { idempotencyKey: plan.idempotencyKey, startAt: startAt(), tags: plan.tags }));
      result.id = scheduled.execution_id;
      this.stats.scheduled += 1;
      if (!scheduled.created) this.stats.scheduleRepeats += 1;
      const id = scheduled.execution_id;
      if (plan.kind === 'event') await this.deliver(id, plan);
      if (plan.kind === 'parallel-events') await this.deliverBoth(id, plan);
      if (plan.kind === 'race-event-timer' && plan.deliverGo) await this.deliverWhenWaiting(id, 'go', goPayload(plan.data));
      if (plan.kind === 'reminder') await this.deliverApproval(id, plan, (result.approval = { acked: false }));
      if (plan.kind === 'cancel' || plan.kind === 'fanout-cancel') {
        await sleep(plan.cancelAfterMs ?? 0);
        await this.retrying(() => this.client.cancel(id));
        this.stats.cancelsSent += 1;
      }
      if (OPERATOR_KINDS.has(plan.kind)) result.final = await this.operator.drive(id, plan, (result.operated = Operator.newRecord()));
      else result.final = await this.waitForEnd(id);
      result.latencyMs = Date.now() - started;
      if (retriedSteps(plan).length > 0) result.steps = await this.retrying(() => this.client.listSteps(id));
    } catch (err) {
      result.problem = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    }
    return result;
  }

  /** Waits until the execution waits for `go`, then delivers it; a delivery whose answer was lost shows as 409 afterwards. */
  private async deliver(id: string, plan: PlannedExecution): Promise<void> {
    for (;;) {
      if (Date.now() > this.deadline) throw new Error('deadline passed before the event could be delivered');
      const current = await this.retrying(() => this.client.get(id));
      if (['completed', 'failed', 'cancelled'].includes(current.status)) return;
      if (current.status === 'waiting' && current.waiting_for_event?.event_name === 'go') {
        try {
          await this.retrying(() => this.client.sendEvent(id, 'go', eventPayload(plan.data)));
          this.stats.eventsDelivered += 1;
          return;
        } catch (err) {
          // Someone (our own earlier try, whose answer was lost) delivered it already: look again.
          if (!(err instanceof StepwiseApiError && err.code === 'not_waiting_for_event')) throw err;
          const after = await this.retrying(() => this.client.get(id));
          if (!(after.status === 'waiting' && after.waiting_for_event?.event_name === 'go')) {
            this.stats.eventsDelivered += 1;
            return;
          }
        }
      }
      await sleep(150 + Math.random() * 150);
    }
  }

  /**
   * Delivers `left` and `right` to an execution that waits for both at once: the plan's first one
   * at once, the other `deliverGapMs` later (0: both together), concurrently.
   */
  private async deliverBoth(id: string, plan: PlannedExecution): Promise<void> {
    const first = plan.firstEvent ?? 'left';
    const order = [first, ...PARALLEL_EVENTS.filter((e) => e !== first)];
    await Promise.all(
      order.map(async (event, i) => {
        if (i > 0) await sleep(plan.deliverGapMs ?? 0);
        await this.deliverWhenWaiting(id, event, parallelEventPayload(plan.data, event));
      }),
    );
  }

  /**
   * Delivers `event` once the execution waits for it. A 409 is expected while the execution runs
   * (it starts, or resumes after the other event, and suspends again on what is still open): it is
   * tried again, until a 200, the execution has finished, or its wait is found completed in the
   * history (an earlier try of ours delivered it and its answer was lost). Bounded.
   */
  private async deliverWhenWaiting(id: string, event: string, payload: unknown): Promise<void> {
    for (let tries = 0; ; tries++) {
      if (Date.now() > this.deadline || tries > 400) throw new Error(`event ${event} not delivered after ${tries} tries`);
      if (tries > 0) await sleep(100 + Math.random() * 150);
      const current = await this.retrying(() => this.client.get(id));
      if (['completed', 'failed', 'cancelled'].includes(current.status)) return;
      if (current.status !== 'waiting') continue;
      if (current.waiting_for_events.some((w) => w.event_name === event)) {
        try {
          await this.retrying(() => this.client.sendEvent(id, event, payload));
          this.stats.eventsDelivered += 1;
          return;
        } catch (err) {
          if (!(err instanceof StepwiseApiError && err.code === 'not_waiting_for_event')) throw err;
          this.stats.eventConflicts += 1;
        }
      } else {
        // Waiting, but not for it: delivered already if its wait is completed in the history (else it
        // has not been reached yet).
        const steps = await this.retrying(() => this.client.listSteps(id));
        if (steps.some((s) => s.kind === 'event' && s.name === event && s.status === 'completed')) {
          this.stats.eventsDelivered += 1;
          return;
        }
      }
    }
  }

  /**
   * Delivers `approval` to a `chaos.reminder` execution once its round `approvalRound` (or a later one,
   * when a fault held the driver up) is open: the execution waits, and its latest `approval` wait (one
   * per round so far) is in progress. A 409 (the round's grace ran out meanwhile, the execution runs)
   * is tried again until a 200; the idempotency key makes a resend after a lost answer repeat it.
   */
  private async deliverApproval(id: string, plan: PlannedExecution, record: ApprovalRecord): Promise<void> {
    const target = plan.approvalRound ?? 1;
    for (let tries = 0; ; tries++) {
      if (Date.now() > this.deadline || tries > 1000) throw new Error(`approval not delivered after ${tries} tries`);
      if (tries > 0) await sleep(60 + Math.random() * 80);
      const current = await this.retrying(() => this.client.get(id));
      if (['completed', 'failed', 'cancelled'].includes(current.status)) return;
      if (current.status !== 'waiting' || !current.waiting_for_events.some((w) => w.event_name === 'approval')) continue;
      const steps = await this.retrying(() => this.client.listSteps(id));
      const waits = steps.filter((s) => s.kind === 'event' && (s.name === 'approval' || s.name.startsWith('approval#')));
      const round = waits.length;
      if (round < target || waits[round - 1].name !== nthName('approval', round) || waits[round - 1].status !== 'in_progress') continue;
      const sent = Date.now();
      try {
        await this.retrying(() => this.client.sendEvent(id, 'approval', approvalPayload(plan.data), { idempotencyKey: `${plan.idempotencyKey}-approval` }));
        this.stats.eventsDelivered += 1;
        record.acked = true;
        record.seenRound = round;
        record.sendMs = Date.now() - sent;
        return;
      } catch (err) {
        if (!(err instanceof StepwiseApiError && err.code === 'not_waiting_for_event')) throw err;
        this.stats.eventConflicts += 1;
      }
    }
  }

  private async waitForEnd(id: string): Promise<Execution> {
    for (;;) {
      this.stats.openLongPolls += 1;
      try {
        return await this.client.wait(id, { timeoutSeconds: 20, deadlineMs: Math.max(1000, this.deadline - Date.now()) });
      } catch (err) {
        if (!isTransient(err) || Date.now() > this.deadline) throw err;
        this.stats.retries += 1;
        await sleep(200 + Math.random() * 300);
      } finally {
        this.stats.openLongPolls -= 1;
      }
    }
  }
}

/** Median and 95th percentile of the latency per kind of execution. */
export function latencyByKind(results: readonly DrivenResult[]): Record<string, { p50: number; p95: number; n: number }> {
  const by = new Map<string, number[]>();
  for (const r of results) if (r?.latencyMs !== undefined) by.set(r.plan.kind, [...(by.get(r.plan.kind) ?? []), r.latencyMs]);
  return Object.fromEntries(
    [...by].map(([kind, list]) => {
      list.sort((a, b) => a - b);
      return [kind, { p50: list[Math.floor(list.length * 0.5)], p95: list[Math.floor(list.length * 0.95)], n: list.length }];
    }),
  );
}
