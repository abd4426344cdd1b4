import type { Knex } from 'knex';

/**
 * Running executions get an index of their own, and no other index holds them. A claim turns a pending
 * (or waiting) row into a running one, and since `status` is indexed every claim writes a new entry
 * into every index whose predicate the new row matches: with the list indexes that was five entries
 * per claim, three of which only a list of running executions read, and those are few (about what the
 * workers hold: their concurrency plus prefetch). Now a claim writes two: the primary key and
 * `executions_running_idx`, which serves both the takeover of expired leases (by task and lease
 * expiry) and the lists of running executions, which sort those few rows.
 *
 * The list indexes leave running rows out; listExecutions and countActiveExecutions read them through
 * the running index and merge them in. The claim's index keeps pending and waiting rows only.
 *
 * Built inside the migration's transaction, so it blocks writes to the table while it runs: on a large
 * table, migrate at a quiet time.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE INDEX executions_running_idx ON stepwise.executions (task, due_at) WHERE status = 'running';
    DROP INDEX stepwise.executions_task_due_idx;
    CREATE INDEX executions_task_due_idx ON stepwise.executions (task, due_at)
      WHERE status IN ('pending','waiting') AND due_at IS NOT NULL;

    DROP INDEX stepwise.executions_created_idx;
    DROP INDEX stepwise.executions_status_created_idx;
    DROP INDEX stepwise.executions_task_created_idx;
    CREATE INDEX executions_created_idx ON stepwise.executions (created_at, id) WHERE status <> 'running';
    CREATE INDEX executions_status_created_idx ON stepwise.executions (status, created_at, id) WHERE status <> 'running';
    CREATE INDEX executions_task_created_idx ON stepwise.executions (task, created_at, id) WHERE status <> 'running';
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP INDEX stepwise.executions_created_idx;
    DROP INDEX stepwise.executions_status_created_idx;
    DROP INDEX stepwise.executions_task_created_idx;
    CREATE INDEX executions_created_idx ON stepwise.executions (created_at, id);
    CREATE INDEX executions_status_created_idx ON stepwise.executions (status, created_at, id);
    CREATE INDEX executions_task_created_idx ON stepwise.executions (task, created_at, id);

    DROP INDEX stepwise.executions_task_due_idx;
    DROP INDEX stepwise.executions_running_idx;
    CREATE INDEX executions_task_due_idx ON stepwise.executions (task, due_at)
      WHERE status IN ('pending','running','waiting') AND due_at IS NOT NULL;
  `);
}
