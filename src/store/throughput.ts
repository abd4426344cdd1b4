import { queryRows, type Db } from './db';

/** The windows GET /stats/throughput takes, in minutes: one bucket per minute. */
export const THROUGHPUT_WINDOW_MINUTES = Object.freeze({ '5m': 5, '15m': 15, '30m': 30, '1h': 60 } as const);
export type ThroughputWindow = keyof typeof THROUGHPUT_WINDOW_MINUTES;

/** One minute's counts. */
export interface ThroughputBucket {
  start: Date;
  created: number;
  completed: number;
  failed: number;
}

/** Whole minutes of the database's clock, in UTC whatever the session's zone: the end of the minute in progress. */
const UNTIL = 'to_timestamp((floor(extract(epoch FROM now()) / 60) + 1) * 60)';
const SINCE = 'to_timestamp((floor(extract(epoch FROM now()) / 60) + 1 - ?::int) * 60)';

/**
 * The statement of countThroughput (exported for the test that reads its plans). Each count reads an
 * index range over the window alone, with its statuses written as literals so the planner can prove a
 * partial index's predicate: created rows through the creation indexes, which leave running rows out
 * (migration 003), and the running ones through the running index (as few as the workers' slots);
 * completed and failed rows through the finished index (migration 023), by `completed_at`.
 */
export function throughputStatement(minutes: number, task: string | undefined): { sql: string; bindings: unknown[] } {
  const bindings: unknown[] = [];
  const range = (column: string, statuses: string) => {
    bindings.push(minutes, ...(task === undefined ? [] : [task]));
    return `SELECT ${column} AS at${column === 'completed_at' ? ', status' : ''} FROM stepwise.executions
             WHERE ${statuses} AND ${column} >= ${SINCE} AND ${column} < ${UNTIL}${task === undefined ? '' : ' AND task = ?'}`;
  };
  const arrived = `${range('created_at', "status <> 'running'")} UNION ALL ${range('created_at', "status = 'running'")}`;
  const finished = range('completed_at', "status IN ('completed', 'failed')");
  bindings.push(minutes);
  const sql = `WITH counted AS (
       SELECT floor(extract(epoch FROM at) / 60) AS minute, 1 AS created, 0 AS completed, 0 AS failed FROM (${arrived}) arrived
       UNION ALL
       SELECT floor(extract(epoch FROM at) / 60), 0, (status = 'completed')::int, (status = 'failed')::int FROM (${finished}) finished
     )
     SELECT m.minute * 60 AS start_epoch, coalesce(sum(c.created), 0)::int AS created,
            coalesce(sum(c.completed), 0)::int AS completed, coalesce(sum(c.failed), 0)::int AS failed
       FROM generate_series(floor(extract(epoch FROM now()) / 60) + 1 - ?::int, floor(extract(epoch FROM now()) / 60)) AS m(minute)
       LEFT JOIN counted c ON c.minute = m.minute
      GROUP BY m.minute
      ORDER BY m.minute`;
  return { sql, bindings };
}

/**
 * Executions created, completed and failed in each minute of the last `minutes`, oldest first, the
 * minute in progress last: one bucket per minute, zeros included. One statement, hence one `now()`.
 */
export async function countThroughput(db: Db, minutes: number, task?: string): Promise<ThroughputBucket[]> {
  const { sql, bindings } = throughputStatement(minutes, task);
  const rows = await queryRows<{ start_epoch: string | number; created: number; completed: number; failed: number }>(db, sql, bindings);
  return rows.map((r) => ({ start: new Date(Number(r.start_epoch) * 1000), created: r.created, completed: r.completed, failed: r.failed }));
}
