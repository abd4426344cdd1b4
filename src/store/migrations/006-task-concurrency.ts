import type { Knex } from 'knex';

/** `concurrency_limit`: at most this many executions of the task run at once over all workers (NULL: no limit). */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE stepwise.tasks ADD COLUMN concurrency_limit integer');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE stepwise.tasks DROP COLUMN concurrency_limit');
}
