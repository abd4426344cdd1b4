import type { Knex } from 'knex';

/**
 * Webhook bodies in the documented field order, with the execution's output as it was written: the
 * payload is `json`, built by json_build_object (which keeps the order of its keys and the text of a
 * json value), where jsonb sorted keys by length and re-spelled the output. The deliverer sends it
 * compacted (webhooks/deliverer.ts). Payloads already queued keep their text. The column's type
 * change rewrites webhook_deliveries once, under a lock that holds its writers for as long.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE stepwise.webhook_deliveries ALTER COLUMN payload TYPE json USING payload::json;
    CREATE OR REPLACE FUNCTION stepwise.enqueue_webhook_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      queued integer;
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM stepwise.webhooks) THEN
        RETURN NULL;
      END IF;
      WITH changed AS MATERIALIZED (
        SELECT n.id, n.task, 'execution.' || n.status AS kind,
               json_build_object(
                 'type', 'execution.' || n.status,
                 'timestamp', to_char(CASE WHEN n.status = 'waiting' THEN now() ELSE coalesce(n.completed_at, now()) END AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                 'data', json_build_object(
                   'execution_id', n.id,
                   'task', n.task,
                   'status', n.status,
                   'attempt', n.attempt,
                   'current_step', CASE WHEN n.status = 'waiting' THEN n.current_step END,
                   'idempotency_key', n.idempotency_key,
                   'tags', coalesce(to_json(n.tags), '[]'::json),
                   'parent_execution_id', n.parent_id,
                   'created_at', to_char(n.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                   'started_at', to_char(n.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                   'completed_at', to_char(n.completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                   'output', CASE WHEN f.fits THEN n.output END,
                   'output_omitted', n.status = 'completed' AND NOT f.fits,
                   'error', CASE WHEN n.status IN ('failed', 'cancelled') THEN n.error END)) AS payload
          FROM new_rows n
          JOIN old_rows o ON o.id = n.id
          CROSS JOIN LATERAL (SELECT n.status = 'completed' AND coalesce(octet_length(n.output::text), 0) <= 262144 AS fits) f
         WHERE o.status IS DISTINCT FROM n.status
           AND n.status IN ('completed', 'failed', 'cancelled', 'waiting')
           AND (n.status <> 'waiting' OR n.current_step IS NOT NULL)
           AND EXISTS (SELECT 1 FROM stepwise.webhooks w WHERE 'execution.' || n.status = ANY (w.events) AND (w.tasks IS NULL OR n.task = ANY (w.tasks)))
      )
      INSERT INTO stepwise.webhook_deliveries (id, webhook_id, event_type, execution_id, payload)
      SELECT gen_random_uuid(), w.id, c.kind, c.id, c.payload
        FROM changed c
        JOIN stepwise.webhooks w ON c.kind = ANY (w.events) AND (w.tasks IS NULL OR c.task = ANY (w.tasks));
      GET DIAGNOSTICS queued = ROW_COUNT;
      IF queued > 0 THEN
        PERFORM pg_notify('stepwise_webhooks', '');
      END IF;
      RETURN NULL;
    END $$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE stepwise.webhook_deliveries ALTER COLUMN payload TYPE jsonb USING payload::jsonb;
    CREATE OR REPLACE FUNCTION stepwise.enqueue_webhook_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      queued integer;
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM stepwise.webhooks) THEN
        RETURN NULL;
      END IF;
      WITH changed AS MATERIALIZED (
        SELECT n.id, n.task, 'execution.' || n.status AS kind,
               jsonb_build_object(
                 'type', 'execution.' || n.status,
                 'timestamp', to_char(CASE WHEN n.status = 'waiting' THEN now() ELSE coalesce(n.completed_at, now()) END AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                 'data', jsonb_build_object(
                   'execution_id', n.id,
                   'task', n.task,
                   'status', n.status,
                   'attempt', n.attempt,
                   'current_step', CASE WHEN n.status = 'waiting' THEN n.current_step END,
                   'idempotency_key', n.idempotency_key,
                   'tags', coalesce(to_jsonb(n.tags), '[]'::jsonb),
                   'parent_execution_id', n.parent_id,
                   'created_at', to_char(n.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                   'started_at', to_char(n.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                   'completed_at', to_char(n.completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                   'output', CASE WHEN f.fits THEN n.output END,
                   'output_omitted', n.status = 'completed' AND NOT f.fits,
                   'error', CASE WHEN n.status IN ('failed', 'cancelled') THEN n.error END)) AS payload
          FROM new_rows n
          JOIN old_rows o ON o.id = n.id
          CROSS JOIN LATERAL (SELECT n.status = 'completed' AND coalesce(octet_length(n.output::text), 0) <= 262144 AS fits) f
         WHERE o.status IS DISTINCT FROM n.status
           AND n.status IN ('completed', 'failed', 'cancelled', 'waiting')
           AND (n.status <> 'waiting' OR n.current_step IS NOT NULL)
           AND EXISTS (SELECT 1 FROM stepwise.webhooks w WHERE 'execution.' || n.status = ANY (w.events) AND (w.tasks IS NULL OR n.task = ANY (w.tasks)))
      )
      INSERT INTO stepwise.webhook_deliveries (id, webhook_id, event_type, execution_id, payload)
      SELECT gen_random_uuid(), w.id, c.kind, c.id, c.payload
        FROM changed c
        JOIN stepwise.webhooks w ON c.kind = ANY (w.events) AND (w.tasks IS NULL OR c.task = ANY (w.tasks));
      GET DIAGNOSTICS queued = ROW_COUNT;
      IF queued > 0 THEN
        PERFORM pg_notify('stepwise_webhooks', '');
      END IF;
      RETURN NULL;
    END $$;
  `);
}
