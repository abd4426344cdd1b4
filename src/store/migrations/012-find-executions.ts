import type { Knex } from 'knex';

/**
 * Finding executions: `executions.tags`, and an index for the list's tag filter (`tags @> $1`, every
 * tag asked for must be present). The other new filters have their indexes already: the key its
 * unique index (001), the creation range `executions_created_idx` and the status and task indexes,
 * which all lead to or end in (created_at, id).
 *
 * - `tags` is NULL when an execution has none (never an empty array), so the index holds only tagged
 *   executions. A nullable column without a default is added without rewriting the table.
 * - The tag index leaves running executions out, as the other list indexes do (003): a claim then
 *   writes no index entry for a tagged execution beyond the two it writes for any, and a running
 *   execution's many updates (lease renewals, steps) none at all. Lists read running executions
 *   through the running index and filter them by tag there, as they do for every other filter.
 * - GIN, so that rows with any one of their up to 20 tags are found without reading the others.
 *
 * The index is built inside the migration's transaction, as the others are: CREATE INDEX blocks writes
 * to the table while it runs, and reads every row even though none has tags yet (docs/benchmarks.md
 * has the time at a million executions). On a large table an operator may build it beforehand without blocking writes,
 * then upgrade; the migration finds both in place and skips them:
 *
 *   ALTER TABLE stepwise.executions ADD COLUMN IF NOT EXISTS tags text[];
 *   CREATE INDEX CONCURRENTLY IF NOT EXISTS executions_tags_idx ON stepwise.executions
 *     USING gin (tags) WHERE tags IS NOT NULL AND status <> 'running';
 *
 * (A concurrent build that fails leaves an INVALID index behind, which IF NOT EXISTS would then skip:
 * drop it and build again.)
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE stepwise.executions ADD COLUMN IF NOT EXISTS tags text[];
    CREATE INDEX IF NOT EXISTS executions_tags_idx ON stepwise.executions
      USING gin (tags) WHERE tags IS NOT NULL AND status <> 'running';
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP INDEX stepwise.executions_tags_idx;
    ALTER TABLE stepwise.executions DROP COLUMN tags;
  `);
}
