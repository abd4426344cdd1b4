import { CHANNEL_WEBHOOKS } from './channels';
import { queryRows, type Db } from './db';

/**
 * Webhook subscriptions (table `webhooks`, migration 014) and what operators read of their deliveries.
 * The deliveries themselves are written by the trigger of migration 014 and by the deliverers
 * (webhook-deliveries.ts).
 */

/** The execution events a webhook may subscribe to: `execution.<status>` of the status entered. */
export const WEBHOOK_EVENT_TYPES = Object.freeze(['execution.completed', 'execution.failed', 'execution.cancelled', 'execution.waiting'] as const);
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
/** What `POST /webhooks/{id}/test` sends. */
export const WEBHOOK_TEST_EVENT = 'webhook.test';

export const DELIVERY_STATUSES = Object.freeze(['pending', 'delivered', 'failed'] as const);
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export interface NewWebhook {
  id: string;
  url: string;
  events: readonly WebhookEventType[];
  /** Only executions of these tasks; undefined: every task. */
  tasks?: readonly string[];
  /** `whsec_` and the base64 of the key: shown once, kept to sign. */
  secret: string;
}

/** A subscription as operators see it: never its secret. */
export interface WebhookRecord {
  id: string;
  url: string;
  events: WebhookEventType[];
  tasks: string[] | null;
  createdAt: Date;
}

/** One attempt of a delivery, as `attempt_log` keeps it. */
export interface DeliveryAttempt {
  at: Date;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
}

export interface DeliveryRecord {
  id: string;
  webhookId: string;
  eventType: string;
  executionId: string | null;
  status: DeliveryStatus;
  attempts: number;
  createdAt: Date;
  /** When the next attempt is due (pending), else null. */
  nextAttemptAt: Date | null;
  /** The latest attempts, oldest first (at most 30). */
  log: DeliveryAttempt[];
}

interface WebhookRow {
  id: string;
  url: string;
  events: WebhookEventType[];
  tasks: string[] | null;
  created_at: Date;
}

interface AttemptJson {
  at: string;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
}

interface DeliveryRow {
  id: string;
  webhook_id: string;
  event_type: string;
  execution_id: string | null;
  status: DeliveryStatus;
  attempts: number;
  created_at: Date;
  next_attempt_at: Date | null;
  attempt_log: AttemptJson[];
}

const toWebhook = (row: WebhookRow): WebhookRecord => ({ id: row.id, url: row.url, events: row.events, tasks: row.tasks, createdAt: row.created_at });

const toDelivery = (row: DeliveryRow): DeliveryRecord => ({
  id: row.id,
  webhookId: row.webhook_id,
  eventType: row.event_type,
  executionId: row.execution_id,
  status: row.status,
  attempts: row.attempts,
  createdAt: row.created_at,
  nextAttemptAt: row.next_attempt_at,
  log: row.attempt_log.map((a) => ({ at: new Date(a.at), statusCode: a.status_code, latencyMs: a.latency_ms, error: a.error })),
});

const WEBHOOK_COLUMNS = 'id, url, events, tasks, created_at';
// While a deliverer holds a delivery, due_at is its lease's end: the next attempt is then "now".
const DELIVERY_COLUMNS = `id, webhook_id, event_type, execution_id, status, attempts, created_at, attempt_log,
  CASE WHEN status <> 'pending' THEN NULL WHEN lease_token IS NOT NULL THEN now() ELSE due_at END AS next_attempt_at`;

/** Records a subscription; it applies to every status change that commits after this statement. */
export async function createWebhook(db: Db, webhook: NewWebhook): Promise<WebhookRecord> {
  const [row] = await queryRows<WebhookRow>(
    db,
    `INSERT INTO stepwise.webhooks (id, url, events, tasks, secret) VALUES (?, ?, ?::text[], ?::text[], ?) RETURNING ${WEBHOOK_COLUMNS}`,
    [webhook.id, webhook.url, [...webhook.events], webhook.tasks ? [...webhook.tasks] : null, webhook.secret],
  );
  return toWebhook(row);
}

/** Every subscription, oldest first. */
export async function listWebhooks(db: Db): Promise<WebhookRecord[]> {
  return (await queryRows<WebhookRow>(db, `SELECT ${WEBHOOK_COLUMNS} FROM stepwise.webhooks ORDER BY created_at, id`)).map(toWebhook);
}

/** True when the subscription exists. */
export async function webhookExists(db: Db, id: string): Promise<boolean> {
  return (await queryRows(db, 'SELECT 1 FROM stepwise.webhooks WHERE id = ?', [id])).length > 0;
}

/**
 * Deletes a subscription and, in the same statement, its deliveries: pending ones are never
 * attempted again (one a deliverer holds may still arrive; its result is not recorded). Returns false
 * when there was none.
 */
export async function deleteWebhook(db: Db, id: string): Promise<boolean> {
  const [row] = await queryRows<{ deleted: number }>(
    db,
    `WITH gone AS (DELETE FROM stepwise.webhooks WHERE id = ? RETURNING id),
          deliveries AS (DELETE FROM stepwise.webhook_deliveries WHERE webhook_id IN (SELECT id FROM gone))
     SELECT count(*) AS deleted FROM gone`,
    [id],
  );
  return row.deleted > 0;
}

/** A page of a webhook's deliveries, newest first, and how many it has in all. */
export async function listDeliveries(db: Db, webhookId: string, limit: number, offset: number): Promise<{ items: DeliveryRecord[]; total: number }> {
  const [rows, [count]] = await Promise.all([
    queryRows<DeliveryRow>(
      db,
      `SELECT ${DELIVERY_COLUMNS} FROM stepwise.webhook_deliveries WHERE webhook_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
      [webhookId, limit, offset],
    ),
    queryRows<{ total: number }>(db, 'SELECT count(*) AS total FROM stepwise.webhook_deliveries WHERE webhook_id = ?', [webhookId]),
  ]);
  return { items: rows.map(toDelivery), total: count.total };
}

/**
 * Queues a `webhook.test` message to the webhook, due now, and wakes the deliverers; undefined when the
 * webhook does not exist.
 */
export async function enqueueTestDelivery(db: Db, webhookId: string, deliveryId: string): Promise<DeliveryRecord | undefined> {
  const [row] = await queryRows<DeliveryRow>(
    db,
    `WITH queued AS (
       INSERT INTO stepwise.webhook_deliveries (id, webhook_id, event_type, payload)
       SELECT ?, w.id, '${WEBHOOK_TEST_EVENT}',
              json_build_object('type', '${WEBHOOK_TEST_EVENT}', 'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                                'data', json_build_object('webhook_id', w.id))
         FROM stepwise.webhooks w WHERE w.id = ?
       RETURNING *
     )
     SELECT ${DELIVERY_COLUMNS}, pg_notify('${CHANNEL_WEBHOOKS}', '') IS NULL AS _n FROM queued`,
    [deliveryId, webhookId],
  );
  return row && toDelivery(row);
}
