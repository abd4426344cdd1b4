import type { Knex } from 'knex';

/**
 * Flow control (PRODUCT.md §8): priorities, keyed concurrency, rate limits and debounce.
 *
 * - `priority` orders claims (higher first, then due order), so the claim index leads with it.
 * - Keys are computed when an execution is inserted, from the JSON Pointer the task registered
 *   (`*_key_path`, its tokens): an API server needs no handler code to apply them, and a claim reads
 *   stored text instead of evaluating pointers. A task without a keyed limit leaves them NULL, so the
 *   partial indexes below hold the rows of keyed tasks only and cost other tasks nothing.
 * - `debounce_key` is set only until the first claim: the unique index then holds at most one
 *   unclaimed pending execution per task and key, which a debounced schedule updates in place.
 * - The new claim index may be built beforehand, CONCURRENTLY, on a large table (see CHANGELOG).
 * - `rate_starts` is the sliding log of a rate-limited task's starts, one row per start, so that no
 *   window of the period holds more than the limit. Claims delete the rows that left the window.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE stepwise.executions
      ADD COLUMN IF NOT EXISTS priority integer NOT NULL DEFAULT 0,
      ADD COLUMN IF NOT EXISTS concurrency_key text,
      ADD COLUMN IF NOT EXISTS rate_key text,
      ADD COLUMN IF NOT EXISTS debounce_key text;

    CREATE INDEX IF NOT EXISTS executions_task_priority_due_idx ON stepwise.executions (task, priority DESC, due_at)
      WHERE status IN ('pending','waiting') AND due_at IS NOT NULL;
    DROP INDEX stepwise.executions_task_due_idx;

    CREATE INDEX executions_concurrency_key_idx ON stepwise.executions (task, concurrency_key, priority DESC, due_at)
      WHERE status IN ('pending','waiting') AND concurrency_key IS NOT NULL;
    CREATE INDEX executions_concurrency_key_running_idx ON stepwise.executions (task, concurrency_key, due_at)
      WHERE status = 'running' AND concurrency_key IS NOT NULL;
    CREATE INDEX executions_rate_key_idx ON stepwise.executions (task, rate_key, priority DESC, due_at)
      WHERE status IN ('pending','waiting') AND rate_key IS NOT NULL;
    CREATE UNIQUE INDEX executions_debounce_key_idx ON stepwise.executions (task, debounce_key)
      WHERE debounce_key IS NOT NULL AND status = 'pending';

    ALTER TABLE stepwise.tasks
      ADD COLUMN concurrency_key text,
      ADD COLUMN concurrency_key_path text[],
      ADD COLUMN rate_limit jsonb,
      ADD COLUMN rate_key_path text[],
      ADD COLUMN debounce jsonb,
      ADD COLUMN debounce_key_path text[];

    CREATE TABLE stepwise.rate_starts (
      task       text NOT NULL,
      key        text NOT NULL,
      started_at timestamptz NOT NULL
    );
    CREATE INDEX rate_starts_key_idx ON stepwise.rate_starts (task, key, started_at);
    CREATE INDEX rate_starts_age_idx ON stepwise.rate_starts (task, started_at);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TABLE stepwise.rate_starts;
    ALTER TABLE stepwise.tasks
      DROP COLUMN concurrency_key, DROP COLUMN concurrency_key_path, DROP COLUMN rate_limit,
      DROP COLUMN rate_key_path, DROP COLUMN debounce, DROP COLUMN debounce_key_path;
    CREATE INDEX executions_task_due_idx ON stepwise.executions (task, due_at)
      WHERE status IN ('pending','waiting') AND due_at IS NOT NULL;
    DROP INDEX stepwise.executions_task_priority_due_idx;
    ALTER TABLE stepwise.executions
      DROP COLUMN priority, DROP COLUMN concurrency_key, DROP COLUMN rate_key, DROP COLUMN debounce_key;
  `);
}
