// The webhook half of `make chaos`: a receiver inside the driver process, subscribed to all four
// execution events at the start, that verifies every signature (the `standardwebhooks` package) and
// sometimes answers 500 or too late, so deliveries are retried; and the end-of-run checks: every
// finished execution was notified of its final status at least once, and no notification names a
// status its execution never had.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { createStepwiseClient } from '../../src/client';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the workers need for the run: private targets (the receiver is on 127.0.0.1), short timeouts and retries. */
export const WEBHOOK_ENV = {
  STEPWISE_WEBHOOKS_ALLOW_PRIVATE: 'true',
  STEPWISE_WEBHOOKS_TIMEOUT_MS: '2000',
  STEPWISE_WEBHOOKS_RETRY_BASE_MS: '200',
};

/** Share of requests answered 500, and of requests answered only after the workers' timeout. */
const FAIL_SHARE = 0.03;
const SLOW_SHARE = 0.01;
const SLOW_MS = 2500;

interface Payload {
  type: string;
  timestamp: string;
  data: { execution_id?: string; status?: string; attempt?: number; output?: unknown; output_omitted?: boolean; current_step?: string | null; error?: { type?: string } | null };
}

/** A verified message, by its webhook-id. */
interface Message {
  payload: Payload;
  /** Answered 2xx at least once. */
  acknowledged: boolean;
  requests: number;
}

export interface WebhookStats {
  requests: number;
  verified: number;
  signatureFailures: number;
  answered500: number;
  answeredLate: number;
  /** Distinct webhook-ids acknowledged more than once (at least once: allowed). */
  redelivered: number;
  byType: Record<string, number>;
}

export class ChaosWebhookReceiver {
  private server: http.Server | undefined;
  private secret: string | undefined;
  readonly messages = new Map<string, Message>();
  readonly stats: WebhookStats = { requests: 0, verified: 0, signatureFailures: 0, answered500: 0, answeredLate: 0, redelivered: 0, byType: {} };
  /** The first requests whose signature failed, for the report. */
  readonly badSignatures: string[] = [];
  webhookId: string | undefined;

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => void this.handle(req, Buffer.concat(chunks).toString('utf8'), res));
    });
    // Keep-alive connections of killed workers must not hold the server open at the end.
    this.server.keepAliveTimeout = 1000;
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server?.address() as AddressInfo).port}/chaos-hook`;
  }

  /** Subscribes the receiver to all four events through the API (retrying through brief outages). */
  async subscribe(baseUrl: string, token: string): Promise<void> {
    const client = createStepwiseClient({ baseUrl, token });
    for (let attempt = 1; ; attempt++) {
      try {
        const created = await client.createWebhook(this.url, ['execution.completed', 'execution.failed', 'execution.cancelled', 'execution.waiting']);
        this.secret = created.secret;
        this.webhookId = created.webhook_id;
        return;
      } catch (err) {
        if (attempt >= 10) throw err;
        await sleep(500);
      }
    }
  }

  private async handle(req: http.IncomingMessage, body: string, res: http.ServerResponse): Promise<void> {
    this.stats.requests += 1;
    const id = String(req.headers['webhook-id'] ?? '');
    let payload: Payload | undefined;
    try {
      payload = new Webhook(this.secret ?? 'whsec_AAAA').verify(body, req.headers as Record<string, string>) as Payload;
    } catch (err) {
      this.stats.signatureFailures += 1;
      if (this.badSignatures.length < 5) this.badSignatures.push(`${id}: ${(err as Error).message}`);
      res.writeHead(400).end();
      return;
    }
    this.stats.verified += 1;
    const roll = Math.random();
    if (roll < FAIL_SHARE) {
      this.stats.answered500 += 1;
      res.writeHead(500).end();
      return;
    }
    if (roll < FAIL_SHARE + SLOW_SHARE) {
      this.stats.answeredLate += 1;
      await sleep(SLOW_MS);
      // The worker gave up already: this answer counts for nothing, the delivery comes again.
      res.writeHead(200).end();
      this.note(id, payload, false);
      return;
    }
    res.writeHead(200).end();
    this.note(id, payload, true);
  }

  private note(id: string, payload: Payload, acknowledged: boolean): void {
    const known = this.messages.get(id);
    if (known) {
      known.requests += 1;
      if (acknowledged && known.acknowledged) this.stats.redelivered += 1;
      known.acknowledged ||= acknowledged;
      return;
    }
    this.messages.set(id, { payload, acknowledged, requests: 1 });
    this.stats.byType[payload.type] = (this.stats.byType[payload.type] ?? 0) + 1;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

/** Waits until no delivery is pending (the workers still run); returns how many were left at the deadline. */
export async function drainDeliveries(url: string, deadlineMs: number, say: (m: string) => void): Promise<{ pending: number; waitedMs: number }> {
  const started = Date.now();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    let pending = 0;
    let lastSaid = 0;
    while (Date.now() - started < deadlineMs) {
      pending = (await client.query<{ n: number }>("SELECT count(*)::int AS n FROM stepwise.webhook_deliveries WHERE status = 'pending'")).rows[0].n;
      if (pending === 0) break;
      if (Date.now() - lastSaid > 10000) {
        say(`waiting for ${pending} webhook deliveries`);
        lastSaid = Date.now();
      }
      await sleep(250);
    }
    return { pending, waitedMs: Date.now() - started };
  } finally {
    await client.end();
  }
}

export interface WebhookVerification {
  counts: WebhookStats & { finishedChecked: number; notifications: number; deliveriesByStatus: Record<string, number>; pendingAtEnd: number };
  violations: Array<[kind: string, message: string]>;
}

/**
 * The checks: every execution created after the subscription that finished was notified of its final
 * status (matching id and type); every notification's status is one its execution had (a completion
 * only of an execution that completed, with its output; a failure or cancel of one that ended so, or
 * was retried from there, as its attempts record; a wait in an operation it recorded as a sleep, an
 * event or child wait, or a step that failed, whose retry may wait); every signature verified; and every
 * delivery recorded delivered was received.
 */
export async function verifyWebhooks(url: string, receiver: ChaosWebhookReceiver, pendingAtEnd: number): Promise<WebhookVerification> {
  const violations: WebhookVerification['violations'] = [];
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const [{ rows: executions }, { rows: attempts }, { rows: waits }, { rows: deliveries }] = await Promise.all([
      client.query<{ id: string; status: string; output: unknown; attempt: number }>(
        `SELECT e.id, e.status, e.output, e.attempt FROM stepwise.executions e, stepwise.webhooks w WHERE w.id = $1 AND e.created_at >= w.created_at`,
        [receiver.webhookId],
      ),
      client.query<{ execution_id: string; attempt: number; outcome: string }>("SELECT execution_id, attempt, outcome FROM stepwise.attempts WHERE outcome IN ('failed', 'cancelled')"),
      // What an execution may wait in: a sleep, an event or a child, or a step that failed (its retry may wait durably).
      client.query<{ execution_id: string; name: string }>("SELECT execution_id, name FROM stepwise.steps WHERE kind IN ('sleep', 'event', 'child') OR wake_at IS NOT NULL OR failures IS NOT NULL"),
      client.query<{ id: string; status: string }>('SELECT id, status FROM stepwise.webhook_deliveries WHERE webhook_id = $1', [receiver.webhookId]),
    ]);
    const byId = new Map(executions.map((e) => [e.id, e]));
    // An attempt that ended the execution (failed for good, or cancelled and then retried). A cancel while
    // pending after a retry ends no new attempt: its row is the failure's (same attempt number).
    const ended = new Set(attempts.map((a) => `${a.execution_id}/${a.attempt}`));
    const waitable = new Set(waits.map((w) => `${w.execution_id}/${w.name}`));
    const notified = new Set<string>();
    for (const [id, m] of receiver.messages) {
      const { type, data } = m.payload;
      const status = type.replace(/^execution\./, '');
      const e = data.execution_id ? byId.get(data.execution_id) : undefined;
      if (!e) continue; // an execution created before the subscription
      notified.add(`${e.id}/${type}`);
      if (data.status !== status) violations.push(['webhook-mismatch', `${id}: type ${type} carries status ${data.status}`]);
      if (status === 'completed') {
        if (e.status !== 'completed') violations.push(['webhook-phantom', `${id}: completed for ${e.id}, which ended ${e.status}`]);
        else if (!data.output_omitted && !isDeepStrictEqual(data.output, e.output)) violations.push(['webhook-phantom', `${id}: completed for ${e.id} with output ${JSON.stringify(data.output)}, not ${JSON.stringify(e.output)}`]);
      } else if (status === 'failed' || status === 'cancelled') {
        // It ended so and was retried from there: its attempt was recorded as ended (or, cancelled before its
        // first attempt, it ran later).
        const retriedFromHere = ended.has(`${e.id}/${data.attempt}`) || (status === 'cancelled' && data.attempt === 0 && e.attempt > 0);
        if (e.status !== status && !retriedFromHere) violations.push(['webhook-phantom', `${id}: ${status} for ${e.id}, which ended ${e.status} and has no ended attempt ${data.attempt}`]);
        if (status === 'cancelled' && data.error?.type !== 'cancelled') violations.push(['webhook-mismatch', `${id}: cancelled with error ${JSON.stringify(data.error)}`]);
      } else if (status === 'waiting') {
        if (!waitable.has(`${e.id}/${data.current_step}`)) violations.push(['webhook-phantom', `${id}: waiting for ${e.id} in ${data.current_step}, which is no wait it recorded`]);
      } else violations.push(['webhook-mismatch', `${id}: unknown type ${type}`]);
    }
    let finishedChecked = 0;
    for (const e of executions) {
      if (!['completed', 'failed', 'cancelled'].includes(e.status)) continue;
      finishedChecked += 1;
      if (!notified.has(`${e.id}/execution.${e.status}`)) violations.push(['webhook-missing', `${e.id} ended ${e.status} without an execution.${e.status} notification`]);
    }
    const deliveriesByStatus: Record<string, number> = {};
    for (const d of deliveries) {
      deliveriesByStatus[d.status] = (deliveriesByStatus[d.status] ?? 0) + 1;
      if (d.status === 'delivered' && !receiver.messages.has(d.id)) violations.push(['webhook-unreceived', `delivery ${d.id} is recorded delivered but never arrived`]);
      if (d.status === 'failed') violations.push(['webhook-failed', `delivery ${d.id} failed`]);
    }
    if (receiver.stats.signatureFailures > 0) violations.push(['webhook-signature', `${receiver.stats.signatureFailures} requests did not verify: ${receiver.badSignatures.join('; ')}`]);
    if (pendingAtEnd > 0) violations.push(['webhook-undelivered', `${pendingAtEnd} deliveries still pending when the workers stopped`]);
    return { counts: { ...receiver.stats, finishedChecked, notifications: receiver.messages.size, deliveriesByStatus, pendingAtEnd }, violations };
  } finally {
    await client.end();
  }
}
