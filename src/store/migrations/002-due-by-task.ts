import type { Knex } from 'knex';

/**
 * The claim's index leads with the task. Ordered by `due_at` alone, a worker serving some tasks had to
 * step over every due row of the tasks it does not serve, fetching each from the heap to read its
 * task, so a claim grew with another task's backlog. With `(task, due_at)` each served task is one ordered range, and the claim
 * reads only the rows it can take (see claimCtes in leases.ts).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE INDEX executions_task_due_idx ON stepwise.executions (task, due_at)
      WHERE status IN ('pending','running','waiting') AND due_at IS NOT NULL;
    DROP INDEX stepwise.executions_due_idx;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE INDEX executions_due_idx ON stepwise.executions (due_at)
      WHERE status IN ('pending','running','waiting') AND due_at IS NOT NULL;
    DROP INDEX stepwise.executions_task_due_idx;
  `);
}
