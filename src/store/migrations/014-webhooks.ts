import type { Knex } from 'knex';

/**
 * Webhooks: subscriptions (`webhooks`) and their outbox (`webhook_deliveries`), filled by a trigger on
 * `executions` in the transaction of the status change itself. Whatever statement moves an execution
 * (a completion, the fused completion and claim, a failure, a cancel and its cascade to children, a
 * suspension), its notification commits with it or not at all: no lost and no phantom notifications.
 *
 * - One trigger call per UPDATE statement, not per row: a statement-level trigger that reads the
 *   statement's rows from its transition tables (old_rows, new_rows). Completions, claims and step
 *   records touch many rows a statement; a row-level trigger would run a function for each of them.
 *   PostgreSQL allows no column list on a trigger with transition tables, so it fires for every UPDATE
 *   of `executions` (lease renewals, step records too) and first asks whether any webhook exists at
 *   all: with none, which is the usual case, that one probe of a tiny table is all it costs. Statements
 *   run by other triggers (the cancel cascade of migration 008) fire it for their own rows.
 * - It queues the rows whose status changed to completed, failed, cancelled or waiting and that a
 *   webhook wants (event type, and task when the webhook names tasks). A claim handed back unstarted to
 *   `waiting` (returnUnstarted, the only move into `waiting` that clears `current_step`) is not a new
 *   wait and is left out.
 * - It snapshots the execution into the payload at the change, since the execution may change again
 *   before the delivery: `{type, timestamp, data: {...}}`. The output goes in only while its JSON is at
 *   most 256 KiB (outputs may be 4 MiB or more); a larger one is left out with `output_omitted: true`
 *   and can be read with GET /executions/{id}.
 * - One delivery row per matching webhook, then one NOTIFY on `stepwise_webhooks` (identical ones fold
 *   into one per transaction), delivered at commit: deliverers wake then, and poll as a fallback.
 *
 * Deliveries name their webhook without a foreign key. A foreign key would make every notifying
 * transaction lock the webhook's row (FOR KEY SHARE), one row that all completions share, and a
 * delete racing the trigger could fail the very transition that notified. Instead, deleting a webhook
 * deletes its deliveries in the same statement, and a delivery that a concurrent transition inserted
 * for it meanwhile is deleted by the claim that meets it (it joins the webhook and finds none).
 *
 * `due_at`, as for executions, is the one column deliverers read: when a pending delivery's next attempt
 * is due, or, while a deliverer attempts it, when that deliverer's lease expires (so a crashed
 * deliverer's deliveries are taken again). `attempt_log` keeps the latest attempts (at most 30).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE stepwise.webhooks (
      id          uuid PRIMARY KEY,
      url         text NOT NULL,
      events      text[] NOT NULL CHECK (cardinality(events) > 0),
      tasks       text[],
      secret      text NOT NULL,
      created_at  timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE stepwise.webhook_deliveries (
      id            uuid PRIMARY KEY,
      webhook_id    uuid NOT NULL,
      event_type    text NOT NULL,
      execution_id  uuid,
      payload       jsonb NOT NULL,
      status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
      due_at        timestamptz DEFAULT now(),
      lease_token   uuid,
      attempts      integer NOT NULL DEFAULT 0,
      attempt_log   jsonb NOT NULL DEFAULT '[]'::jsonb,
      created_at    timestamptz NOT NULL DEFAULT now(),
      finished_at   timestamptz
    );
    -- The claim: oldest due first among pending deliveries.
    CREATE INDEX webhook_deliveries_due_idx ON stepwise.webhook_deliveries (due_at) WHERE status = 'pending';
    -- A webhook's deliveries, newest first; the retention sweep's range too.
    CREATE INDEX webhook_deliveries_webhook_idx ON stepwise.webhook_deliveries (webhook_id, created_at, id);

    CREATE FUNCTION stepwise.enqueue_webhook_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
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

    CREATE TRIGGER executions_webhooks AFTER UPDATE ON stepwise.executions
      REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT
      EXECUTE FUNCTION stepwise.enqueue_webhook_deliveries();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER executions_webhooks ON stepwise.executions;
    DROP FUNCTION stepwise.enqueue_webhook_deliveries();
    DROP TABLE stepwise.webhook_deliveries;
    DROP TABLE stepwise.webhooks;
  `);
}
