import type { Knex } from 'knex';

/** `cron`: the schedule a task declared (`{ pattern, timezone }`), recorded by workers for the API. */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE stepwise.tasks ADD COLUMN cron jsonb');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE stepwise.tasks DROP COLUMN cron');
}
