import { randomUUID } from 'node:crypto';
import { GroupCommitter } from '../group-commit';
import { WakeSignal } from '../engine/wake-signal';
import type { Logger } from '../logger';
import { CHANNEL_WEBHOOKS } from '../store/channels';
import type { Db } from '../store/db';
import { isDatabaseUnavailable } from '../store/db-errors';
import { NotificationListener } from '../store/listener';
import { claimDueDeliveries, recordAttempts, type AttemptRecord, type ClaimedDelivery, type RecordedAttempt } from '../store/webhook-deliveries';
import { retryDelayMs } from './backoff';
import { WebhookSender } from './sender';
import { signatureHeaders } from './signing';
import type { TargetPolicy } from './targets';

/** What became of one attempt: delivered, to be retried, failed for good, or not recorded (lease lost, webhook deleted, database away). */
export type AttemptOutcome = 'delivered' | 'retrying' | 'failed' | 'unrecorded';

/** Hooks for metrics. */
/**
 * Idle polls space out up to this many poll intervals, further than a worker's: queued deliveries are
 * announced (NOTIFY) and this process's retries wake it on time, so a poll only finds the retries of
 * a deliverer that went away, which may come a few seconds late.
 */
const IDLE_POLL_STRETCH = 8;

export interface DeliveryObserver {
  attempted?(outcome: AttemptOutcome, latencyMs: number): void;
  databaseError?(): void;
}

export interface DelivererOptions {
  db: Db;
  /** For the LISTEN connection: a direct URL, never a transaction pooler's (config db.listenUrl). */
  databaseUrl: string;
  /** The process's shared LISTEN connection, started and stopped by the caller; else one of its own. */
  listener?: NotificationListener;
  log: Logger;
  policy: TargetPolicy;
  /** Attempts under way at once (default 16). */
  concurrency?: number;
  /** One attempt's limit (default 10 s). */
  timeoutMs?: number;
  /** The first retry's delay (default 5 s); see backoff.ts. */
  retryBaseMs?: number;
  /** Retries stop this long after a delivery's creation (default 24 h). */
  retryForMs?: number;
  /** Looks for due deliveries this often without a notification (default 1 s). */
  pollIntervalMs?: number;
  /** How long a claim holds a delivery (default: twice the timeout plus 5 s); a deliverer that dies loses it after this. */
  leaseMs?: number;
  observer?: DeliveryObserver;
}

/** A deliverer's life: it claims only while running; stopping lets its attempts under way finish. */
export const DELIVERER_STATES = Object.freeze({ created: 'created', running: 'running', stopping: 'stopping', stopped: 'stopped' } as const);
export type DelivererState = (typeof DELIVERER_STATES)[keyof typeof DELIVERER_STATES];

/**
 * Delivers what the outbox holds. Each worker process runs one: it claims due deliveries (claimDueDeliveries,
 * SKIP LOCKED, so deliverers share the work), attempts up to `concurrency` of them at once, and records
 * each attempt (delivered, or due again after a backoff, or failed once the retry period is over). It
 * wakes on NOTIFY `stepwise_webhooks`, sent by the transaction that queued deliveries, and polls as a
 * fallback; the notification is only a latency hint.
 */
export class WebhookDeliverer {
  private state: DelivererState = DELIVERER_STATES.created;
  private readonly concurrency: number;
  private readonly timeoutMs: number;
  private readonly retryBaseMs: number;
  private readonly retryForMs: number;
  private readonly pollIntervalMs: number;
  private readonly leaseMs: number;
  private readonly sender: WebhookSender;
  private readonly listener: NotificationListener;
  private readonly ownsListener: boolean;
  private readonly onNotification = (channel: string) => {
    if (channel === CHANNEL_WEBHOOKS) this.signal.wake();
  };
  // Notifications sent while disconnected are lost: every (re)connect counts as one.
  private readonly onConnected = () => this.signal.wake();
  private readonly signal = new WakeSignal();
  private readonly attempts = new Set<Promise<void>>();
  /** Attempts finishing together are recorded in one statement and one commit. */
  private readonly records: GroupCommitter<AttemptRecord, RecordedAttempt | undefined>;
  private loopDone: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: DelivererOptions) {
    this.concurrency = options.concurrency ?? 16;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.retryBaseMs = options.retryBaseMs ?? 5000;
    this.retryForMs = options.retryForMs ?? 86_400_000;
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    // Past the attempt's own limit, room for recording it; a record that comes later is fenced out and
    // the delivery made again (at least once).
    this.leaseMs = options.leaseMs ?? 2 * this.timeoutMs + 5000;
    this.sender = new WebhookSender({ policy: options.policy, timeoutMs: this.timeoutMs });
    this.records = new GroupCommitter(async (items) => {
      const recorded = await recordAttempts(options.db, items, this.retryForMs);
      return items.map((i) => recorded.get(i.delivery.id));
    }, isDatabaseUnavailable);
    this.ownsListener = options.listener === undefined;
    this.listener = options.listener ?? new NotificationListener({ url: options.databaseUrl, log: options.log });
    this.listener.on('notification', this.onNotification);
    this.listener.on('connected', this.onConnected);
  }

  /** Attempts under way now. */
  get inFlight(): number {
    return this.attempts.size;
  }

  /** Starts listening and delivering. */
  async start(): Promise<void> {
    if (this.state !== DELIVERER_STATES.created) throw new Error('a deliverer starts once');
    await this.listener.listen([CHANNEL_WEBHOOKS]);
    await this.listener.start();
    this.state = DELIVERER_STATES.running;
    this.loopDone = this.loop();
  }

  /** Idempotent; resolves once the attempts under way are recorded. */
  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    if (this.state === DELIVERER_STATES.created) {
      this.listener.off('notification', this.onNotification);
      this.listener.off('connected', this.onConnected);
      this.state = DELIVERER_STATES.stopped;
      return;
    }
    this.state = DELIVERER_STATES.stopping;
    this.signal.wake();
    await this.loopDone;
    // Each attempt ends within its timeout; what it cannot record is attempted again after its lease.
    await Promise.all([...this.attempts]);
    this.signal.clearTimers();
    this.listener.off('notification', this.onNotification);
    this.listener.off('connected', this.onConnected);
    if (this.ownsListener) await this.listener.stop();
    this.sender.close();
    this.state = DELIVERER_STATES.stopped;
  }

  private async loop(): Promise<void> {
    let backoff = 100;
    let idlePolls = 0;
    while (this.state === DELIVERER_STATES.running) {
      // Attempts that end in the same turn free their slots together: claim once for all of them.
      if (this.attempts.size > 0) await new Promise((resolve) => setImmediate(resolve));
      const free = this.concurrency - this.attempts.size;
      if (free <= 0) {
        await this.signal.wait(this.pollIntervalMs);
        this.signal.reset();
        continue;
      }
      this.signal.reset();
      const epoch = this.signal.epoch;
      let claimed: ClaimedDelivery[];
      try {
        claimed = await claimDueDeliveries(this.options.db, free, this.leaseMs, randomUUID());
        backoff = 100;
      } catch (err) {
        this.options.observer?.databaseError?.();
        this.options.log.warn({ err: (err as Error).message, backoffMs: backoff }, 'webhook delivery claim failed');
        await this.signal.wait(backoff / 2 + Math.random() * (backoff / 2));
        backoff = Math.min(backoff * 2, 5000);
        continue;
      }
      for (const delivery of claimed) this.launch(delivery);
      // A full batch means more may be due: claim again as soon as there is room. Polls that find
      // nothing, with nothing announced meanwhile, space out (see IDLE_POLL_STRETCH).
      if (claimed.length < free) {
        idlePolls = claimed.length === 0 && this.signal.epoch === epoch ? idlePolls + 1 : 0;
        await this.signal.wait(this.pollIntervalMs * Math.min(2 ** idlePolls, IDLE_POLL_STRETCH));
      }
    }
  }

  private launch(delivery: ClaimedDelivery): void {
    const attempt = this.attempt(delivery).finally(() => {
      this.attempts.delete(attempt);
      this.signal.wake();
    });
    this.attempts.add(attempt);
  }

  /** Sends one delivery and records the attempt; never rejects. */
  private async attempt(delivery: ClaimedDelivery): Promise<void> {
    const { log, observer } = this.options;
    const result = await this.sender.send(delivery.url, delivery.body, signatureHeaders(delivery.secret, delivery.id, delivery.body));
    const attempt = delivery.attempts + 1;
    const fields = { deliveryId: delivery.id, webhookId: delivery.webhookId, eventType: delivery.eventType, executionId: delivery.executionId, attempt, statusCode: result.statusCode, latencyMs: result.latencyMs };
    let outcome: AttemptOutcome = 'unrecorded';
    try {
      const delayMs = retryDelayMs(attempt, this.retryBaseMs);
      const recorded = await this.records.submit({ delivery, result, retryDelayMs: delayMs });
      if (recorded) outcome = recorded.status === 'pending' ? 'retrying' : recorded.status;
      // Its retry comes due after the delay (or sooner, at the retry period's end): wake for it, not at a poll.
      if (outcome === 'retrying') this.signal.wakeAt(Date.now() + delayMs);
      if (!recorded) log.info(fields, 'webhook attempt not recorded: its lease ran out or its webhook was deleted');
      else if (outcome === 'delivered') log.debug(fields, 'webhook delivered');
      else if (outcome === 'retrying') log.info({ ...fields, error: result.error, nextAttemptAt: recorded.dueAt?.toISOString() }, 'webhook attempt failed; retrying later');
      else log.warn({ ...fields, error: result.error }, 'webhook delivery failed; no retries left');
    } catch (err) {
      if (isDatabaseUnavailable(err)) observer?.databaseError?.();
      log.warn({ ...fields, err: (err as Error).message }, 'webhook attempt could not be recorded; it is attempted again once its lease runs out');
    }
    observer?.attempted?.(outcome, result.latencyMs);
  }
}
