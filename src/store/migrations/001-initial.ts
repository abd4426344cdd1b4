import type { Knex } from 'knex';

/**
 * The whole state of Stepwise. `due_at` is the one column the claim reads: for a pending execution it
 * is when it may start (now, or after a retry's backoff), for a waiting one when its sleep or event
 * timeout ends (NULL: wait forever), and for a running one when its lease expires, so a single partial
 * index serves new work, wake-ups and takeovers alike.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE SCHEMA IF NOT EXISTS stepwise;

    CREATE TABLE stepwise.tasks (
      name           text PRIMARY KEY,
      data_schema    jsonb,
      event_schemas  jsonb NOT NULL DEFAULT '{}'::jsonb,
      retry          jsonb,
      updated_at     timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE stepwise.executions (
      id                uuid PRIMARY KEY,
      task              text NOT NULL,
      status            text NOT NULL CHECK (status IN ('pending','running','waiting','completed','failed','cancelled')),
      data              jsonb,
      idempotency_key   text,
      attempt           integer NOT NULL DEFAULT 0,
      steps_completed   integer NOT NULL DEFAULT 0,
      current_step      text,
      wait_event_name   text,
      wait_since        timestamptz,
      wait_timeout_at   timestamptz,
      due_at            timestamptz,
      lease_token       uuid,
      created_at        timestamptz NOT NULL DEFAULT now(),
      started_at        timestamptz,
      completed_at      timestamptz,
      output            jsonb,
      error             jsonb
    );

    -- Partial: most executions have no key, and every non-HOT update would otherwise index a NULL.
    CREATE UNIQUE INDEX executions_idempotency_key_idx ON stepwise.executions (idempotency_key) WHERE idempotency_key IS NOT NULL;
    -- The claim: oldest due first among active executions.
    CREATE INDEX executions_due_idx ON stepwise.executions (due_at)
      WHERE status IN ('pending','running','waiting') AND due_at IS NOT NULL;
    -- The list endpoint's filters, each in its stable order (created_at, id).
    CREATE INDEX executions_created_idx ON stepwise.executions (created_at, id);
    CREATE INDEX executions_status_created_idx ON stepwise.executions (status, created_at, id);
    CREATE INDEX executions_task_created_idx ON stepwise.executions (task, created_at, id);

    CREATE TABLE stepwise.steps (
      execution_id  uuid NOT NULL REFERENCES stepwise.executions (id) ON DELETE CASCADE,
      seq           integer NOT NULL,
      name          text NOT NULL,
      kind          text NOT NULL CHECK (kind IN ('step','sleep','event')),
      completed     boolean NOT NULL DEFAULT false,
      result        jsonb,
      wake_at       timestamptz,
      started_at    timestamptz NOT NULL DEFAULT now(),
      completed_at  timestamptz,
      PRIMARY KEY (execution_id, seq)
    );
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP SCHEMA IF EXISTS stepwise CASCADE');
}
