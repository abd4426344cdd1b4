import { CHANNEL_TASKS, CHANNEL_WORK } from './channels';
import { queryRows, type Db, type Runner } from './db';
import { TERMINAL_STATUS_LIST, toJsonb } from './rows';

/** A task as workers register it: its name and the JSON Schemas the API validates against. */
export interface TaskRecord {
  name: string;
  dataSchema: unknown;
  eventSchemas: Record<string, unknown>;
  retry: unknown;
  /** The schedule the task runs on besides its scheduled executions, or null. */
  cron: TaskCron | null;
  /** At most this many executions run at once over all workers, or null for no limit. */
  concurrencyLimit: number | null;
  /** A paused task's executions are not claimed: pending ones stay pending. */
  paused: boolean;
  updatedAt: Date;
}

/** A task's cron trigger as recorded: the pattern and the IANA time zone it is read in. */
export interface TaskCron {
  pattern: string;
  timezone: string;
}

interface TaskRow {
  name: string;
  data_schema: unknown;
  event_schemas: Record<string, unknown>;
  retry: unknown;
  cron: TaskCron | null;
  concurrency_limit: number | null;
  paused: boolean;
  updated_at: Date;
}

function rowToTask(row: TaskRow): TaskRecord {
  return { name: row.name, dataSchema: row.data_schema, eventSchemas: row.event_schemas ?? {}, retry: row.retry, cron: row.cron ?? null, concurrencyLimit: row.concurrency_limit ?? null, paused: row.paused ?? false, updatedAt: row.updated_at };
}

export interface TaskRegistration {
  name: string;
  dataSchema: unknown;
  eventSchemas: Record<string, unknown>;
  retry: unknown;
  cron?: TaskCron | null;
  concurrencyLimit?: number | null;
}

/**
 * Records (or refreshes) the tasks a worker serves; the last worker to start defines the schemas. API
 * servers hear of it on CHANNEL_TASKS when it commits and drop the validators they cached.
 */
export async function upsertTasks(db: Db, tasks: readonly TaskRegistration[]): Promise<void> {
  if (tasks.length === 0) return;
  await queryRows(
    db,
    `INSERT INTO stepwise.tasks (name, data_schema, event_schemas, retry, cron, concurrency_limit, updated_at)
     SELECT * , now() FROM unnest(?::text[], ?::jsonb[], ?::jsonb[], ?::jsonb[], ?::jsonb[], ?::int[])
     ON CONFLICT (name) DO UPDATE
       SET data_schema = EXCLUDED.data_schema, event_schemas = EXCLUDED.event_schemas,
           retry = EXCLUDED.retry, cron = EXCLUDED.cron, concurrency_limit = EXCLUDED.concurrency_limit, updated_at = now()
     RETURNING pg_notify('${CHANNEL_TASKS}', name) IS NULL AS _n`,
    [
      tasks.map((t) => t.name),
      tasks.map((t) => toJsonb(t.dataSchema ?? null)),
      tasks.map((t) => toJsonb(t.eventSchemas ?? {})),
      tasks.map((t) => toJsonb(t.retry ?? null)),
      tasks.map((t) => (t.cron ? toJsonb(t.cron) : null)),
      tasks.map((t) => t.concurrencyLimit ?? null),
    ],
  );
}

export async function getTask(db: Db, name: string): Promise<TaskRecord | undefined> {
  const rows = await queryRows<TaskRow>(db, 'SELECT * FROM stepwise.tasks WHERE name = ?', [name]);
  return rows[0] ? rowToTask(rows[0]) : undefined;
}

export async function listTasks(db: Db): Promise<TaskRecord[]> {
  const rows = await queryRows<TaskRow>(db, 'SELECT * FROM stepwise.tasks ORDER BY name');
  return rows.map(rowToTask);
}

export interface StatusCount {
  task: string;
  status: string;
  count: number;
}

/**
 * Finished executions (completed, failed, cancelled) per task and status. This reads every finished
 * row the retention period keeps, so its cost grows with the history: the API recounts it in the
 * background and serves the last count (see FinishedCounts).
 */
export async function countFinishedExecutions(db: Db): Promise<StatusCount[]> {
  return queryRows(db, `SELECT task, status, count(*)::int AS count FROM stepwise.executions WHERE status IN (${TERMINAL_STATUS_LIST}) GROUP BY task, status`);
}

/**
 * Active executions (pending, running, waiting) per task and status. Cheap: it reads only active rows,
 * pending and waiting ones through the (status, created_at, id) index and running ones through the
 * running index (see migration 003), however many finished executions the table holds.
 */
export async function countActiveExecutions(db: Db): Promise<StatusCount[]> {
  return queryRows(
    db,
    `SELECT task, status, count(*)::int AS count FROM (
       SELECT task, status FROM stepwise.executions WHERE status IN ('pending','waiting')
       UNION ALL
       SELECT task, status FROM stepwise.executions WHERE status = 'running'
     ) a GROUP BY task, status`,
  );
}

/**
 * Pending executions that are not due yet: scheduled with a later `start_at`, or backing off before a
 * retry. They wait for a time, not for a worker, so the queue-depth metric counts them apart.
 */
export async function countPendingNotDue(db: Db): Promise<number> {
  const [row] = await queryRows<{ n: number }>(db, "SELECT count(*)::int AS n FROM stepwise.executions WHERE status = 'pending' AND due_at > now()");
  return row.n;
}

/**
 * A registered task's data schema as the JSON text PostgreSQL prints (so the caller's jsonb type
 * parser plays no part), read through `run` (the caller's own connection, for schedule()); undefined
 * when no worker registered the task.
 */
export async function readDataSchemaText(run: Runner, name: string): Promise<{ schema: string | null } | undefined> {
  const [row] = await run<{ schema: string | null }>('', 'SELECT data_schema::text AS schema FROM stepwise.tasks WHERE name = $1', [name]);
  return row;
}

/**
 * Pauses or resumes a task; undefined when no worker registered it. A pause takes effect at the next
 * claim (claims skip paused tasks in the statement itself); running executions finish. A resume wakes
 * the workers at once, so what waited starts without waiting for a poll. Either way the API servers
 * hear of it on CHANNEL_TASKS.
 */
export async function setTaskPaused(db: Db, name: string, paused: boolean): Promise<TaskRecord | undefined> {
  const rows = await queryRows<TaskRow>(
    db,
    `UPDATE stepwise.tasks SET paused = ? WHERE name = ?
     RETURNING *, pg_notify('${CHANNEL_TASKS}', name) IS NULL AS _t, CASE WHEN NOT paused THEN pg_notify('${CHANNEL_WORK}', name) END IS NULL AS _w`,
    [paused, name],
  );
  return rows[0] ? rowToTask(rows[0]) : undefined;
}
