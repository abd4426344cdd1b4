import type { Knex } from 'knex';

/**
 * Task versions (PRODUCT.md §9): an execution is pinned to the version of the task's code it started
 * on, and only workers serving that version claim it again.
 *
 * - `task_version` is NULL until the first claim, which stamps the claiming worker's version ('' for
 *   a task defined without one): a pending execution that never ran has no history to replay, so any
 *   version may start it. Executions already started when this runs are pinned to '' (the code
 *   deployed before versions existed), so that they drain on the workers that started them.
 * - The claim index gains the version after `task`: a claim reads the unpinned rows and the rows of
 *   its own version as two ranges, and never steps over the rows of a version nobody serves. It is
 *   indexed as coalesce(task_version, '*') (PIN_KEY): the planner reads a range in index order only
 *   under an equality, which `IS NULL` is not, so the unpinned range would be read whole and sorted.
 * - Workers record the version they serve of each task (`task_versions`, task → version), which
 *   readers join to the executions to show what is in flight per version and what nobody serves.
 * - `tasks.current_version` is the version of the worker that registered the task last: only its
 *   workers start new executions, while a live worker serves it (see startingTasks).
 * - `patch` steps are the markers ctx.patched() records.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE stepwise.executions ADD COLUMN IF NOT EXISTS task_version text;
    UPDATE stepwise.executions SET task_version = '' WHERE status IN ('pending','running','waiting') AND attempt > 0;

    CREATE INDEX IF NOT EXISTS executions_task_version_due_idx ON stepwise.executions (task, (coalesce(task_version, '*')), priority DESC, due_at)
      WHERE status IN ('pending','waiting') AND due_at IS NOT NULL;
    DROP INDEX stepwise.executions_task_priority_due_idx;

    ALTER TABLE stepwise.workers ADD COLUMN task_versions jsonb NOT NULL DEFAULT '{}'::jsonb;
    ALTER TABLE stepwise.tasks ADD COLUMN current_version text;

    ALTER TABLE stepwise.steps DROP CONSTRAINT IF EXISTS steps_kind_check;
    ALTER TABLE stepwise.steps ADD CONSTRAINT steps_kind_check CHECK (kind IN ('step','sleep','event','child','patch')) NOT VALID;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DELETE FROM stepwise.steps WHERE kind = 'patch';
    ALTER TABLE stepwise.steps DROP CONSTRAINT IF EXISTS steps_kind_check;
    ALTER TABLE stepwise.steps ADD CONSTRAINT steps_kind_check CHECK (kind IN ('step','sleep','event','child')) NOT VALID;
    ALTER TABLE stepwise.workers DROP COLUMN task_versions;
    ALTER TABLE stepwise.tasks DROP COLUMN current_version;
    CREATE INDEX executions_task_priority_due_idx ON stepwise.executions (task, priority DESC, due_at)
      WHERE status IN ('pending','waiting') AND due_at IS NOT NULL;
    DROP INDEX stepwise.executions_task_version_due_idx;
    ALTER TABLE stepwise.executions DROP COLUMN task_version;
  `);
}
