import { queryRows, type Db } from './db';

/**
 * Counts of executions kept by migration 018's triggers: a folded count per (task, status) plus the
 * deltas written since the last fold. Their sum, read in one snapshot, is exactly what count(*) would
 * return, but it reads a few hundred small rows instead of every execution the table holds.
 */

/** What a maintained count can be narrowed by: the columns it is kept per. */
export interface CountFilter {
  task?: string;
  status?: string;
}

/**
 * The maintained counts as rows (task, status, n): the folded counts and the deltas since, narrowed by
 * `where` (applied to both, so its bindings come twice). Summed in one statement, exact in its snapshot.
 */
function countRows(where: string): string {
  return `SELECT task, status, n FROM stepwise.execution_counts ${where}
          UNION ALL
          SELECT task, status, n FROM stepwise.execution_count_deltas ${where}`;
}

/**
 * An expression for the number of executions matching `filter`, exact in the statement's snapshot,
 * with its bindings in order (for listStatement, which reads it beside the page).
 */
export function maintainedCountSql(filter: CountFilter): { sql: string; bindings: unknown[] } {
  const conditions: string[] = [];
  const values: unknown[] = [];
  if (filter.task !== undefined) {
    conditions.push('task = ?');
    values.push(filter.task);
  }
  if (filter.status !== undefined) {
    conditions.push('status = ?');
    values.push(filter.status);
  }
  const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
  return { sql: `(SELECT coalesce(sum(n), 0) FROM (${countRows(where)}) c)`, bindings: [...values, ...values] };
}

/** How many executions of a task are in a status. */
export interface StatusCount {
  task: string;
  status: string;
  count: number;
}

/**
 * Executions per task and status (only those in `statuses`, when given), exact whatever the table's
 * size. Counts that fell to zero are left out, as a GROUP BY over the executions would.
 */
export async function countExecutionsByTaskAndStatus(db: Db, statuses?: readonly string[]): Promise<StatusCount[]> {
  const where = statuses ? 'WHERE status = ANY(?::text[])' : '';
  return queryRows(
    db,
    `SELECT task, status, sum(n)::bigint::int AS count FROM (${countRows(where)}) c GROUP BY task, status HAVING sum(n) <> 0`,
    statuses ? [[...statuses], [...statuses]] : [],
  );
}

/**
 * Moves the deltas into the counts, in one statement: a reader sees the deltas or their sum, never
 * both or neither. Concurrent folds are safe: the second waits for the rows the first deletes and then
 * skips them. Counts are upserted in key order, so two folds cannot deadlock on them. Returns how many
 * delta rows it folded.
 */
export async function foldExecutionCounts(db: Db): Promise<number> {
  const rows = await queryRows<{ folded: string }>(
    db,
    `WITH moved AS (
       DELETE FROM stepwise.execution_count_deltas RETURNING task, status, n
     ),
     summed AS (
       SELECT task, status, sum(n) AS n, count(*) AS folded FROM moved GROUP BY task, status
     ),
     upserted AS (
       INSERT INTO stepwise.execution_counts AS c (task, status, n)
       SELECT task, status, n FROM summed ORDER BY task, status
       ON CONFLICT (task, status) DO UPDATE SET n = c.n + excluded.n
       RETURNING 1
     )
     SELECT coalesce(sum(folded), 0)::text AS folded FROM summed`,
  );
  return Number(rows[0].folded);
}
