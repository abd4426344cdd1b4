import type { Knex } from 'knex';

/**
 * `start_at`: the later start a client asked for when scheduling, kept so that the execution's
 * representation can say why it is still pending. The claim does not select by it: a delayed execution
 * is inserted with `due_at` at that time, which is all the claim needs (it returns it, for the
 * schedule-to-start metric). A nullable column without a default is added without rewriting the table.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE stepwise.executions ADD COLUMN start_at timestamptz');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE stepwise.executions DROP COLUMN start_at');
}
