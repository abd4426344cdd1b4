import { NO_FLOW, type FlowKey, type FlowPolicy } from '../domain/flow';
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
  /** Keyed concurrency, rate limit and debounce, as the last worker to start registered them. */
  flow: FlowPolicy;
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
  concurrency_key: string | null;
  concurrency_key_path: string[] | null;
  rate_limit: { limit: number; period_ms: number; key: string | null } | null;
  rate_key_path: string[] | null;
  debounce: { period_ms: number; key: string | null } | null;
  debounce_key_path: string[] | null;
  paused: boolean;
  updated_at: Date;
}

const toKey = (pointer: string | null, path: string[] | null): FlowKey | null => (pointer !== null && path !== null ? { pointer, path } : null);

function rowToFlow(row: TaskRow): FlowPolicy {
  if (row.concurrency_limit === null && !row.rate_limit && !row.debounce) return NO_FLOW;
  return {
    concurrency: row.concurrency_limit === null ? null : { limit: row.concurrency_limit, key: toKey(row.concurrency_key ?? null, row.concurrency_key_path ?? null) },
    rateLimit: row.rate_limit ? { limit: row.rate_limit.limit, periodMs: row.rate_limit.period_ms, key: toKey(row.rate_limit.key, row.rate_key_path ?? null) } : null,
    debounce: row.debounce ? { periodMs: row.debounce.period_ms, key: toKey(row.debounce.key, row.debounce_key_path ?? null) } : null,
  };
}

function rowToTask(row: TaskRow): TaskRecord {
  return { name: row.name, dataSchema: row.data_schema, eventSchemas: row.event_schemas ?? {}, retry: row.retry, cron: row.cron ?? null, concurrencyLimit: row.concurrency_limit ?? null, flow: rowToFlow(row), paused: row.paused ?? false, updatedAt: row.updated_at };
}

export interface TaskRegistration {
  name: string;
  dataSchema: unknown;
  eventSchemas: Record<string, unknown>;
  retry: unknown;
  cron?: TaskCron | null;
  flow?: FlowPolicy;
  /** The version of its code the registering worker serves ('' for none): it becomes the current one. */
  version?: string;
}

/** A key's path as a jsonb array (NULL for none): an array parameter cannot hold one array per row. */
const pathJson = (key: FlowKey | null | undefined) => (key ? JSON.stringify(key.path) : null);
const PATH_FROM_JSON = (json: string) => `CASE WHEN ${json} IS NOT NULL THEN ARRAY(SELECT jsonb_array_elements_text(${json})) END`;

/**
 * The key an execution of a keyed task is counted under: the text at the task's pointer into `data`
 * (`path`, NULL for an unkeyed task), or '' when `data` has no value there, so that such executions
 * share one key rather than escape the limit.
 */
export const flowKeySql = (data: string, path: string) => `CASE WHEN ${path} IS NOT NULL THEN coalesce(${data} #>> ${path}, '') END`;

/**
 * Records (or refreshes) the tasks a worker serves; the last worker to start defines the schemas. API
 * servers hear of it on CHANNEL_TASKS when it commits and drop the validators they cached. Returns
 * the tasks whose flow-control keys changed, whose unfinished executions it keyed again.
 */
export async function upsertTasks(db: Db, tasks: readonly TaskRegistration[]): Promise<string[]> {
  if (tasks.length === 0) return [];
  const flows = tasks.map((t) => t.flow ?? NO_FLOW);
  // The tasks whose keys changed (or are new), from the rows as they were before this statement.
  const changed = await queryRows<{ name: string }>(
    db,
    `WITH old AS (SELECT name, concurrency_key_path, rate_key_path FROM stepwise.tasks WHERE name = ANY(?::text[])),
     up AS (
       INSERT INTO stepwise.tasks (name, data_schema, event_schemas, retry, cron, concurrency_limit, concurrency_key, concurrency_key_path,
                                   rate_limit, rate_key_path, debounce, debounce_key_path, current_version, updated_at)
       SELECT name, data_schema, event_schemas, retry, cron, concurrency_limit, concurrency_key, ${PATH_FROM_JSON('ckp')},
              rate_limit, ${PATH_FROM_JSON('rkp')}, debounce, ${PATH_FROM_JSON('dkp')}, current_version, now()
         FROM unnest(?::text[], ?::jsonb[], ?::jsonb[], ?::jsonb[], ?::jsonb[], ?::int[], ?::text[], ?::jsonb[], ?::jsonb[], ?::jsonb[], ?::jsonb[], ?::jsonb[], ?::text[])
              AS u(name, data_schema, event_schemas, retry, cron, concurrency_limit, concurrency_key, ckp, rate_limit, rkp, debounce, dkp, current_version)
       ON CONFLICT (name) DO UPDATE
         SET data_schema = EXCLUDED.data_schema, event_schemas = EXCLUDED.event_schemas, retry = EXCLUDED.retry, cron = EXCLUDED.cron,
             concurrency_limit = EXCLUDED.concurrency_limit, concurrency_key = EXCLUDED.concurrency_key,
             concurrency_key_path = EXCLUDED.concurrency_key_path, rate_limit = EXCLUDED.rate_limit, rate_key_path = EXCLUDED.rate_key_path,
             debounce = EXCLUDED.debounce, debounce_key_path = EXCLUDED.debounce_key_path, current_version = EXCLUDED.current_version, updated_at = now()
       RETURNING name, concurrency_key_path, rate_key_path, pg_notify('${CHANNEL_TASKS}', name) IS NULL AS _n
     )
     SELECT up.name FROM up LEFT JOIN old USING (name)
      WHERE up.concurrency_key_path IS DISTINCT FROM old.concurrency_key_path OR up.rate_key_path IS DISTINCT FROM old.rate_key_path`,
    [
      tasks.map((t) => t.name),
      tasks.map((t) => t.name),
      tasks.map((t) => toJsonb(t.dataSchema ?? null)),
      tasks.map((t) => toJsonb(t.eventSchemas ?? {})),
      tasks.map((t) => toJsonb(t.retry ?? null)),
      tasks.map((t) => (t.cron ? toJsonb(t.cron) : null)),
      flows.map((f) => f.concurrency?.limit ?? null),
      flows.map((f) => f.concurrency?.key?.pointer ?? null),
      flows.map((f) => pathJson(f.concurrency?.key)),
      flows.map((f) => (f.rateLimit ? toJsonb({ limit: f.rateLimit.limit, period_ms: f.rateLimit.periodMs, key: f.rateLimit.key?.pointer ?? null }) : null)),
      flows.map((f) => pathJson(f.rateLimit?.key)),
      flows.map((f) => (f.debounce ? toJsonb({ period_ms: f.debounce.periodMs, key: f.debounce.key?.pointer ?? null }) : null)),
      flows.map((f) => pathJson(f.debounce?.key)),
      tasks.map((t) => t.version ?? ''),
    ],
  );
  const names = changed.map((c) => c.name);
  if (names.length > 0) await rekeyExecutions(db, names);
  return names;
}

/**
 * Computes again the keys of the unfinished executions of tasks whose keys changed: a deploy that
 * adds or moves a key applies it to the backlog too, not only to executions scheduled from now on.
 * An insert whose statement began before the change committed computed the old keys and may commit
 * after this update: the registering worker runs it once more a little later (see Worker.start).
 */
export async function rekeyExecutions(db: Db, names: readonly string[]): Promise<void> {
  await queryRows(
    db,
    `UPDATE stepwise.executions e
        SET concurrency_key = ${flowKeySql('e.data', 't.concurrency_key_path')}, rate_key = ${flowKeySql('e.data', 't.rate_key_path')}
       FROM stepwise.tasks t
      WHERE t.name = e.task AND e.task = ANY(?::text[]) AND e.status IN ('pending','running','waiting')
        AND (e.concurrency_key IS DISTINCT FROM ${flowKeySql('e.data', 't.concurrency_key_path')}
             OR e.rate_key IS DISTINCT FROM ${flowKeySql('e.data', 't.rate_key_path')})`,
    [names],
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
 * parser plays no part), and whether it debounces its schedules, read through `run` (the caller's own connection, for schedule()); undefined
 * when no worker registered the task.
 */
export async function readDataSchemaText(run: Runner, name: string): Promise<{ schema: string | null; debounced: boolean } | undefined> {
  const [row] = await run<{ schema: string | null; debounced: boolean }>('', 'SELECT data_schema::text AS schema, debounce IS NOT NULL AS debounced FROM stepwise.tasks WHERE name = $1', [name]);
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

/** One value of a task's flow-control key: what runs, what is due and waits, what started in the rate window. */
export interface KeyCount {
  key: string;
  running: number;
  waiting: number;
  /** Starts within the rate-limit window, when the task's rate limit counts by this key; else null. */
  startedInWindow: number | null;
}

/** The most key values shown per task. */
const KEYS_SHOWN = 20;

/**
 * The key values of a task with a keyed concurrency or rate limit that have the most executions due
 * and waiting, then running (at most 20). Reads the task's unfinished executions only, through the
 * keys' partial indexes; empty for a task without a keyed limit.
 */
export async function countKeys(db: Db, task: TaskRecord): Promise<KeyCount[]> {
  const { concurrency, rateLimit } = task.flow;
  const column = concurrency?.key ? 'concurrency_key' : rateLimit?.key ? 'rate_key' : null;
  if (column === null) return [];
  const rows = await queryRows<{ key: string; running: number; waiting: number }>(
    db,
    `SELECT ${column} AS key,
            count(*) FILTER (WHERE status = 'running' AND due_at > now())::int AS running,
            count(*) FILTER (WHERE status IN ('pending','waiting') AND due_at <= now())::int AS waiting
       FROM stepwise.executions
      WHERE task = ? AND status IN ('pending','running','waiting') AND ${column} IS NOT NULL
      GROUP BY 1
     HAVING count(*) FILTER (WHERE (status = 'running' AND due_at > now()) OR (status IN ('pending','waiting') AND due_at <= now())) > 0
      ORDER BY waiting DESC, running DESC, key
      LIMIT ${KEYS_SHOWN}`,
    [task.name],
  );
  // The rate window's starts, when the rate limit counts by the same key as the rows above.
  const rateByThis = rateLimit !== null && (column === 'rate_key' || rateLimit.key?.pointer === concurrency?.key?.pointer);
  const started = new Map<string, number>();
  if (rateByThis && rows.length > 0) {
    const counts = await queryRows<{ key: string; n: number }>(
      db,
      `SELECT key, count(*)::int AS n FROM stepwise.rate_starts
        WHERE task = ? AND key = ANY(?::text[]) AND started_at > clock_timestamp() - make_interval(secs => ?::float8)
        GROUP BY key`,
      [task.name, rows.map((r) => r.key), rateLimit.periodMs / 1000],
    );
    for (const c of counts) started.set(c.key, c.n);
  }
  return rows.map((r) => ({ ...r, startedInWindow: rateByThis ? (started.get(r.key) ?? 0) : null }));
}
