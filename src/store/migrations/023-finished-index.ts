import type { Knex } from 'knex';

/**
 * The throughput chart (GET /stats/throughput) counts the executions that completed or failed in each
 * minute of the last hour. No index held `completed_at`: the count would read the whole table. This one
 * holds the completed and failed executions only, each entered once, by the update that finishes it
 * (a status change, already a non-HOT update, so no update that was HOT stops being one); task and
 * status ride along so a count reads the index alone where the table's pages are all-visible.
 * `completed_at IS NOT NULL` (true of every such row) keeps it to queries that bound completed_at: a
 * list of completed executions in creation order must not take it for a small index to read whole.
 *
 * Built inside the migration's transaction, which blocks writes to the executions while it reads the
 * table. On a large table, build it first without blocking writes and the migration skips it:
 *   CREATE INDEX CONCURRENTLY IF NOT EXISTS executions_finished_idx ON stepwise.executions (completed_at)
 *     INCLUDE (task, status) WHERE status IN ('completed', 'failed') AND completed_at IS NOT NULL;
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE INDEX IF NOT EXISTS executions_finished_idx ON stepwise.executions (completed_at) INCLUDE (task, status)
      WHERE status IN ('completed', 'failed') AND completed_at IS NOT NULL
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS stepwise.executions_finished_idx');
}
