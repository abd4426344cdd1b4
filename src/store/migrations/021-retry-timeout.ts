import type { Knex } from 'knex';

/**
 * A task's timeout counts from `timeout_from`, no longer from `started_at`: an operator's retry
 * clears it, so the retried attempt's first claim starts a fresh timeout, while `started_at` keeps
 * telling when the execution first ran. Until now a retry of an execution that failed on its timeout
 * kept the old deadline and failed again at once.
 *
 * The executions that may still run (pending, running, waiting) keep the deadline they had. A bulk
 * update of the active rows only: finished ones get theirs from the claim after a retry.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE stepwise.executions ADD COLUMN IF NOT EXISTS timeout_from timestamptz;
    UPDATE stepwise.executions SET timeout_from = started_at
     WHERE status IN ('pending', 'running', 'waiting') AND started_at IS NOT NULL AND timeout_from IS NULL;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE stepwise.executions DROP COLUMN IF EXISTS timeout_from');
}
