import { queryRows, type Db } from './db';
import { compactJsonText } from '../domain/json';

/**
 * The deliverers' statements on `webhook_deliveries` (migration 014): claim due deliveries, record an
 * attempt, measure the backlog, and delete finished deliveries past the retention period.
 */

/** A delivery a deliverer holds, with what it needs to send it. */
export interface ClaimedDelivery {
  id: string;
  webhookId: string;
  eventType: string;
  executionId: string | null;
  /** The payload's JSON text, compacted, sent (and signed) as it is. */
  body: string;
  /** Attempts made before this one. */
  attempts: number;
  createdAt: Date;
  url: string;
  secret: string;
  /** This claim's lease: a record lands only while it is the delivery's. */
  leaseToken: string;
}

interface ClaimedRow {
  id: string;
  webhook_id: string;
  event_type: string;
  execution_id: string | null;
  body: string;
  attempts: number;
  created_at: Date;
  url: string;
  secret: string;
}

/**
 * The claim. Invariant: while a deliverer's lease runs (due_at in the future, lease_token its own), no
 * other deliverer takes the delivery; once it runs out (the deliverer died or stalled), the delivery is
 * due again and any deliverer takes it, with a new token that fences the old holder's record out.
 * SKIP LOCKED lets concurrent deliverers take disjoint rows instead of queueing on each other. A due
 * delivery whose webhook is gone (inserted by a transition that raced the webhook's deletion) is deleted
 * here instead of being claimed.
 */
const CLAIM_SQL = `
  WITH due AS (
    SELECT id, webhook_id FROM stepwise.webhook_deliveries
     WHERE status = 'pending' AND due_at <= now()
     ORDER BY due_at
     LIMIT ?
       FOR UPDATE SKIP LOCKED
  ),
  orphaned AS (
    DELETE FROM stepwise.webhook_deliveries d USING due
     WHERE d.id = due.id AND NOT EXISTS (SELECT 1 FROM stepwise.webhooks w WHERE w.id = due.webhook_id)
  )
  UPDATE stepwise.webhook_deliveries d
     SET lease_token = ?, due_at = now() + make_interval(secs => ?::float8 / 1000)
    FROM due JOIN stepwise.webhooks w ON w.id = due.webhook_id
   WHERE d.id = due.id
  RETURNING d.id, d.webhook_id, d.event_type, d.execution_id, d.payload::text AS body, d.attempts, d.created_at, w.url, w.secret`;

/** Takes up to `limit` due deliveries for `leaseMs` under `leaseToken` (see CLAIM_SQL). */
export async function claimDueDeliveries(db: Db, limit: number, leaseMs: number, leaseToken: string): Promise<ClaimedDelivery[]> {
  if (limit <= 0) return [];
  const rows = await queryRows<ClaimedRow>(db, CLAIM_SQL, [limit, leaseToken, leaseMs]);
  return rows.map((r) => ({
    id: r.id,
    webhookId: r.webhook_id,
    eventType: r.event_type,
    executionId: r.execution_id,
    body: compactJsonText(r.body),
    attempts: r.attempts,
    createdAt: r.created_at,
    url: r.url,
    secret: r.secret,
    leaseToken,
  }));
}

/** What one attempt came to. */
export interface AttemptResult {
  /** Answered 2xx. */
  delivered: boolean;
  /** The HTTP status, when there was an answer. */
  statusCode: number | null;
  latencyMs: number;
  /** Why it failed, when it did: a status, a network error, a timeout, a refused target. */
  error: string | null;
}

export interface RecordedAttempt {
  status: 'pending' | 'delivered' | 'failed';
  /** The next attempt (pending), else null. */
  dueAt: Date | null;
}

/** Attempts `attempt_log` keeps per delivery: the latest ones. */
const KEPT_ATTEMPTS = 30;

/** One attempt to record: its delivery (with the lease it was made under), what came of it, when to retry. */
export interface AttemptRecord {
  delivery: Pick<ClaimedDelivery, 'id' | 'leaseToken'>;
  result: AttemptResult;
  /** The delay before the next attempt, should this one have failed. */
  retryDelayMs: number;
}

/**
 * Records attempts of held deliveries, many in one statement (the deliverer group-commits them): a
 * delivery is delivered on 2xx; otherwise due again after its retry delay, but never later than
 * `retryForMs` after its creation, and failed once an attempt at or past that point fails. Fenced by
 * the lease: an attempt whose lease ran out (another deliverer took the delivery) records nothing, nor
 * one whose webhook was deleted meanwhile; their entries are missing from the answer.
 */
export async function recordAttempts(db: Db, records: readonly AttemptRecord[], retryForMs: number): Promise<Map<string, RecordedAttempt>> {
  if (records.length === 0) return new Map();
  const rows = await queryRows<{ id: string; status: RecordedAttempt['status']; due_at: Date | null }>(
    db,
    `WITH a AS (
       SELECT a.*, make_interval(secs => a.delay_ms / 1000) AS delay,
              jsonb_build_object('at', to_char((now() - make_interval(secs => a.latency_ms / 1000)) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                                 'status_code', a.status_code, 'latency_ms', a.latency_ms::integer, 'error', a.error) AS entry
         FROM unnest(?::uuid[], ?::uuid[], ?::boolean[], ?::float8[], ?::float8[], ?::integer[], ?::text[])
           AS a(id, token, ok, delay_ms, latency_ms, status_code, error)
     ),
     p AS (SELECT make_interval(secs => ?::float8 / 1000) AS retry_for)
     UPDATE stepwise.webhook_deliveries d
        SET status = CASE WHEN a.ok THEN 'delivered' WHEN now() >= d.created_at + p.retry_for THEN 'failed' ELSE 'pending' END,
            due_at = CASE WHEN a.ok OR now() >= d.created_at + p.retry_for THEN NULL ELSE least(now() + a.delay, d.created_at + p.retry_for) END,
            finished_at = CASE WHEN a.ok OR now() >= d.created_at + p.retry_for THEN now() END,
            lease_token = NULL,
            attempts = d.attempts + 1,
            attempt_log = (CASE WHEN jsonb_array_length(d.attempt_log) >= ${KEPT_ATTEMPTS} THEN d.attempt_log - 0 ELSE d.attempt_log END) || jsonb_build_array(a.entry)
       FROM a, p
      WHERE d.id = a.id AND d.lease_token = a.token AND d.status = 'pending'
     RETURNING d.id, d.status, d.due_at`,
    [
      records.map((r) => r.delivery.id),
      records.map((r) => r.delivery.leaseToken),
      records.map((r) => r.result.delivered),
      records.map((r) => Math.max(0, Math.round(r.retryDelayMs))),
      records.map((r) => Math.max(0, Math.round(r.result.latencyMs))),
      records.map((r) => r.result.statusCode),
      records.map((r) => r.result.error),
      retryForMs,
    ],
  );
  return new Map(rows.map((r) => [r.id, { status: r.status, dueAt: r.due_at }]));
}

/** Pending deliveries, and how long the most overdue one has been due (0 when none is). */
export async function measureDeliveryBacklog(db: Db): Promise<{ pending: number; overdueSeconds: number }> {
  const [row] = await queryRows<{ pending: number; overdue: number | null }>(
    db,
    `SELECT count(*) AS pending, extract(epoch FROM now() - min(due_at))::float8 AS overdue
       FROM stepwise.webhook_deliveries WHERE status = 'pending'`,
  );
  return { pending: row.pending, overdueSeconds: Math.max(0, row.overdue ?? 0) };
}

/**
 * The statement of deleteFinishedDeliveries. Through the (webhook_id, created_at) index, one range per
 * webhook (a handful): a delivery finishes within the retry period of its creation, so its creation
 * bounds the scan. SKIP LOCKED, as for executions, lets concurrent sweeps take disjoint rows.
 */
const DELETE_FINISHED_SQL = `
  DELETE FROM stepwise.webhook_deliveries
   WHERE id IN (
     SELECT d.id FROM stepwise.webhook_deliveries d
      WHERE d.webhook_id IN (SELECT id FROM stepwise.webhooks) AND d.created_at < ? AND d.status <> 'pending'
      LIMIT ?
        FOR UPDATE SKIP LOCKED)
  RETURNING 1`;

/** Deletes up to `limit` delivered or failed deliveries created before `cutoff`; returns how many. */
export async function deleteFinishedDeliveries(db: Db, cutoff: Date, limit: number): Promise<number> {
  return (await queryRows(db, DELETE_FINISHED_SQL, [cutoff, limit])).length;
}
