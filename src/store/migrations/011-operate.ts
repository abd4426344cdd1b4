import type { Knex } from 'knex';

/**
 * Operating executions (issue #19).
 *
 * - `attempts`: the attempts that ended without ending their execution (failed and retried, released
 *   by a worker shutting down, lost with their lease) and every final failure, with its error (and a
 *   bounded stack). An execution's current or last attempt is read from its own row otherwise, so the
 *   hot paths (a claim, a completion) write nothing here.
 * - `executions.worker_id`, `executions.attempt_started_at`: who runs the current attempt, since
 *   when (set by the claim that starts an attempt).
 * - `steps.attempt_base`: the failed attempts a step's retry budget no longer counts (a retry of the
 *   execution gives every step a fresh budget; its failures stay in the history).
 * - `tasks.paused`: a paused task's executions are not claimed.
 *
 * New columns are nullable or have constant defaults: no table rewrite.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE stepwise.attempts (
      execution_id  uuid NOT NULL REFERENCES stepwise.executions (id) ON DELETE CASCADE,
      attempt       integer NOT NULL,
      worker_id     uuid,
      started_at    timestamptz,
      ended_at      timestamptz NOT NULL,
      outcome       text NOT NULL CHECK (outcome IN ('completed', 'failed', 'retrying', 'released', 'lost', 'cancelled')),
      error         jsonb,
      PRIMARY KEY (execution_id, attempt)
    );
    ALTER TABLE stepwise.executions ADD COLUMN worker_id uuid;
    ALTER TABLE stepwise.executions ADD COLUMN attempt_started_at timestamptz;
    ALTER TABLE stepwise.steps ADD COLUMN attempt_base integer NOT NULL DEFAULT 0;
    ALTER TABLE stepwise.tasks ADD COLUMN paused boolean NOT NULL DEFAULT false;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE stepwise.tasks DROP COLUMN paused;
    ALTER TABLE stepwise.steps DROP COLUMN attempt_base;
    ALTER TABLE stepwise.executions DROP COLUMN attempt_started_at;
    ALTER TABLE stepwise.executions DROP COLUMN worker_id;
    DROP TABLE stepwise.attempts;
  `);
}
