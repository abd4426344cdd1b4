import type { Knex } from 'knex';

/**
 * Exact counts of executions per (task, status) that cost the same at ten rows or ten million, for the
 * list's `total` and the task counts (see store/execution-counts.ts).
 *
 * - `execution_counts` holds the folded count of each (task, status).
 * - `execution_count_deltas` is append-only: statement-level triggers with transition tables add one
 *   row per (task, status) a statement changed, with the net change, in the writer's own transaction.
 *   Writers only ever insert, so no two of them wait on one counter row however hot the task is, and
 *   a claim or completion batch of 50 rows adds two delta rows, not a hundred.
 * - A reader sums the counts and the deltas in one snapshot, which equals count(*) exactly; the fold
 *   (foldExecutionCounts) moves deltas into the counts in one statement, so a reader sees either side
 *   of it whole.
 * - Updates that leave task and status alone (leases, steps, progress) net to zero and add no row.
 *
 * Creating the triggers locks out writers until this transaction commits, so the first count, taken
 * after them, misses no change and counts none twice.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE stepwise.execution_counts (
      task   text   NOT NULL,
      status text   NOT NULL,
      n      bigint NOT NULL,
      PRIMARY KEY (task, status)
    );
    -- Rows live for about a fold interval: vacuum it by dead rows, not by a share of a tiny table.
    CREATE TABLE stepwise.execution_count_deltas (
      task   text   NOT NULL,
      status text   NOT NULL,
      n      bigint NOT NULL
    ) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
            autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 5000);

    CREATE FUNCTION stepwise.count_inserted_executions() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO stepwise.execution_count_deltas (task, status, n)
      SELECT task, status, count(*) FROM inserted GROUP BY task, status;
      RETURN NULL;
    END $$;

    CREATE FUNCTION stepwise.count_updated_executions() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO stepwise.execution_count_deltas (task, status, n)
      SELECT task, status, sum(n) FROM (
        SELECT task, status, 1 AS n FROM after_rows
        UNION ALL
        SELECT task, status, -1 FROM before_rows
      ) c GROUP BY task, status HAVING sum(n) <> 0;
      RETURN NULL;
    END $$;

    CREATE FUNCTION stepwise.count_deleted_executions() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO stepwise.execution_count_deltas (task, status, n)
      SELECT task, status, -count(*) FROM deleted GROUP BY task, status;
      RETURN NULL;
    END $$;

    CREATE FUNCTION stepwise.count_truncated_executions() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM stepwise.execution_count_deltas;
      DELETE FROM stepwise.execution_counts;
      RETURN NULL;
    END $$;

    CREATE TRIGGER executions_count_inserted AFTER INSERT ON stepwise.executions
      REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION stepwise.count_inserted_executions();
    CREATE TRIGGER executions_count_updated AFTER UPDATE ON stepwise.executions
      REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows FOR EACH STATEMENT EXECUTE FUNCTION stepwise.count_updated_executions();
    CREATE TRIGGER executions_count_deleted AFTER DELETE ON stepwise.executions
      REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION stepwise.count_deleted_executions();
    CREATE TRIGGER executions_count_truncated AFTER TRUNCATE ON stepwise.executions
      FOR EACH STATEMENT EXECUTE FUNCTION stepwise.count_truncated_executions();

    INSERT INTO stepwise.execution_counts (task, status, n)
    SELECT task, status, count(*) FROM stepwise.executions GROUP BY task, status;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER IF EXISTS executions_count_inserted ON stepwise.executions;
    DROP TRIGGER IF EXISTS executions_count_updated ON stepwise.executions;
    DROP TRIGGER IF EXISTS executions_count_deleted ON stepwise.executions;
    DROP TRIGGER IF EXISTS executions_count_truncated ON stepwise.executions;
    DROP FUNCTION IF EXISTS stepwise.count_inserted_executions();
    DROP FUNCTION IF EXISTS stepwise.count_updated_executions();
    DROP FUNCTION IF EXISTS stepwise.count_deleted_executions();
    DROP FUNCTION IF EXISTS stepwise.count_truncated_executions();
    DROP TABLE IF EXISTS stepwise.execution_count_deltas;
    DROP TABLE IF EXISTS stepwise.execution_counts;
  `);
}
