import type { Knex } from 'knex';

/**
 * Trace context: `traceparent` keeps the W3C traceparent an execution was scheduled with (the
 * `traceparent` header of POST /executions, the caller's active span in schedule(), or the span of
 * the parent's step that started a child), so that its attempts are spans in the caller's trace.
 * NULL when none came: its attempts then make a trace of their own, named by the execution's id.
 * A nullable column without a default: adding it rewrites no row and takes the lock only briefly.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE stepwise.executions ADD COLUMN IF NOT EXISTS traceparent text');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE stepwise.executions DROP COLUMN IF EXISTS traceparent');
}
