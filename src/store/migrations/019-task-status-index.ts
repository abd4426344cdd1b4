import type { Knex } from 'knex';

/**
 * A list filtered by task and status ("the failed executions of charge-card", the dashboard's most
 * common question) had no index that yields it in creation order: the planner walked the creation
 * index or scanned the table, filtering, and a task that had no execution in that status read every
 * row (seconds at ten million). (task, status, created_at, id) answers it as one range, in order.
 * Running rows are left out, as from the other list indexes (migration 003).
 *
 * Built inside the migration's transaction, which blocks writes to the executions while it reads the
 * table. On a large table, build it first without blocking writes and the migration skips it:
 *   CREATE INDEX CONCURRENTLY IF NOT EXISTS executions_task_status_created_idx
 *     ON stepwise.executions (task, status, created_at, id) WHERE status <> 'running';
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE INDEX IF NOT EXISTS executions_task_status_created_idx ON stepwise.executions (task, status, created_at, id)
      WHERE status <> 'running'
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS stepwise.executions_task_status_created_idx');
}
