import pg from 'pg';
import { newExecutionId } from '../domain/ids';
import type { ExecutionStatus } from '../domain/status';
import { poolRunner, preparedRows, queryRows, withReadCommitted, type Db, type Runner } from './db';
import { CHANNEL_CHANGED, CHANNEL_CANCEL, CHANNEL_WORK, notifyWorkSql } from './channels';
import { rowToExecution, toJsonb, type ExecutionRecord, type ExecutionRow } from './rows';
import { flowKeySql } from './tasks';
import { maintainedCountSql } from './execution-counts';

/** What a client asks to run. */
export interface NewExecution {
  task: string;
  data: unknown;
  idempotencyKey?: string;
  /** Not before this instant; a past one (or none) means at once. */
  startAt?: Date;
  /** Labels to find it by (checked by the caller); none or empty is stored as NULL. */
  tags?: readonly string[];
  /** Claimed before due executions of lower priority (default 0). */
  priority?: number;
  /** The W3C traceparent its attempts' spans are children of (checked by the caller); none is stored as NULL. */
  traceparent?: string;
}

/** What scheduling needs back: the columns the schedule endpoint answers with, never the data. */
export type ScheduledRecord = Pick<ExecutionRecord, 'id' | 'task' | 'status' | 'createdAt'>;

export interface ScheduleResult {
  execution: ScheduledRecord;
  /** False when an execution with the same idempotency key already existed, or a debounce kept one. */
  created: boolean;
  /** Set for a debounced task's schedule: true when it updated the pending execution rather than making one. */
  debounced?: boolean;
}

/** created_at in whole epoch milliseconds (as pg parses a timestamp), a number whatever the caller's type parsers. */
type ScheduledRow = Pick<ExecutionRow, 'id' | 'task' | 'status'> & { created_ms: number };

const SCHEDULED_COLUMNS = 'id, task, status, floor(extract(epoch FROM created_at) * 1000)::float8 AS created_ms';

function toScheduledRecord(row: ScheduledRow): ScheduledRecord {
  return { id: row.id, task: row.task, status: row.status, createdAt: new Date(row.created_ms) };
}

/**
 * Inserts executions, several at once when the API batches concurrent requests. An idempotency
 * key that is already taken (also by a concurrent insert, or twice within the batch) yields the
 * existing row, never a second one: ON CONFLICT DO NOTHING leans on the unique index, and the rows it
 * skipped are read back afterwards. One plain INSERT, no CTE: it returns only the four columns the
 * caller answers with (not the data it just sent, which would travel back and be parsed again), and
 * wakes the workers from RETURNING. pg_notify runs per row but Postgres folds identical notifications
 * within a transaction, so workers hear one per distinct task, cheaper than a CTE that notifies once
 * per DISTINCT task. An execution asked to start later is due then, and wakes no
 * worker now: the workers' poll finds it once it is due. A start in the past is due at once, never
 * before work already queued (`greatest`), so a backdated start cannot jump the queue. A batch without
 * start times or tags takes a leaner statement: the start times' column and expressions on every
 * INSERT cost scheduling over HTTP measurably.
 *
 * The read-back is a second statement, so the row that held a key can be gone by then: a retention
 * sweep deleted it (only finished executions are deleted, and their keys are free again). Such items
 * are inserted again, as if they had come a moment later.
 */
export async function insertExecutions(db: Db, items: readonly NewExecution[]): Promise<ScheduleResult[]> {
  return insertWith(poolRunner(db), items);
}

/**
 * insertExecutions through a runner of onCallerConnection: in a REPEATABLE READ or SERIALIZABLE
 * transaction, a key taken by a transaction that committed after this one began is a serialization
 * failure, which the caller retries as any other.
 */
export function insertExecutionsWith(run: Runner, items: readonly NewExecution[]): Promise<ScheduleResult[]> {
  return insertWith(run, items);
}

async function insertWith(run: Runner, items: readonly NewExecution[]): Promise<ScheduleResult[]> {
  const results = await insertOnce(run, items);
  for (let round = 1; results.includes(undefined); round++) {
    if (round === 3) throw new Error('idempotent insert found neither a new nor an existing row, three times');
    const again = results.flatMap((r, i) => (r === undefined ? [i] : []));
    const found = await insertOnce(run, again.map((i) => items[i]));
    again.forEach((i, j) => (results[i] = found[j]));
  }
  return results as ScheduleResult[];
}

const INSERT_TAIL = `ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
     RETURNING ${SCHEDULED_COLUMNS}`;

/**
 * The flow-control keys of the rows being inserted, from the task's registered pointers (see
 * migration 015): a LEFT JOIN on the task's row, which unkeyed tasks answer with NULL paths.
 */
const KEY_COLUMNS = 'concurrency_key, rate_key';
const keyValues = (data: string) => `${flowKeySql(data, 'tk.concurrency_key_path')}, ${flowKeySql(data, 'tk.rate_key_path')}`;
const TASK_JOIN = (task: string) => `LEFT JOIN stepwise.tasks tk ON tk.name = ${task}`;

/** The common path, every execution due at once, at priority 0: $1-$4 the ids, tasks, data and keys. */
const INSERT_SQL = `INSERT INTO stepwise.executions (id, task, status, data, idempotency_key, created_at, due_at, ${KEY_COLUMNS})
     SELECT id, task, 'pending', data, idempotency_key, statement_timestamp(), statement_timestamp(), ${keyValues('t.data')}
       FROM unnest($1::uuid[], $2::text[], $3::jsonb[], $4::text[]) WITH ORDINALITY AS t(id, task, data, idempotency_key, ord)
       ${TASK_JOIN('t.task')}
      ORDER BY ord
     ${INSERT_TAIL}, pg_notify('${CHANNEL_WORK}', task) IS NULL AS _n`;

/** Tags travel as a JSON array (or NULL for none): an array parameter cannot hold one array per row. */
const TAGS_FROM_JSON = (json: string) => `CASE WHEN ${json} IS NOT NULL THEN ARRAY(SELECT jsonb_array_elements_text(${json})) END`;

/**
 * A batch with start times, tags or priorities. Start times are $5, NULL for at once, sent as ISO
 * text, as pg would send a Date in the process's local time zone, which before 1900 is local mean
 * time: only rows due now wake the workers. Tags are $6, priorities $7. `traced`: traceparents are $8
 * (migration 017), in a statement of their own, so that batches without one send no such column.
 */
const insertFullSql = (traced: boolean) => `INSERT INTO stepwise.executions (id, task, status, data, idempotency_key, start_at, tags, priority, created_at, due_at, ${KEY_COLUMNS}${traced ? ', traceparent' : ''})
     SELECT id, task, 'pending', data, idempotency_key, start_at, ${TAGS_FROM_JSON('tags_json')}, priority, statement_timestamp(), greatest(statement_timestamp(), start_at),
            ${keyValues('t.data')}${traced ? ', traceparent' : ''}
       FROM unnest($1::uuid[], $2::text[], $3::jsonb[], $4::text[], $5::timestamptz[], $6::jsonb[], $7::int[]${traced ? ', $8::text[]' : ''})
            WITH ORDINALITY AS t(id, task, data, idempotency_key, start_at, tags_json, priority, ${traced ? 'traceparent, ' : ''}ord)
       ${TASK_JOIN('t.task')}
      ORDER BY ord
     ${INSERT_TAIL}, ${notifyWorkSql('task', 'due_at')} IS NULL AS _n`;
const INSERT_FULL_SQL = insertFullSql(false);
const INSERT_TRACED_SQL = insertFullSql(true);

/**
 * One execution, with or without a start time ($5, NULL for at once), tags ($6) and a priority ($7),
 * and when `traced` a traceparent ($8): insertFullSql's rows and notification, in a statement that an
 * unnamed (unprepared) call parses and plans faster than the unnest.
 */
const oneRowSql = (traced: boolean) => `INSERT INTO stepwise.executions (id, task, status, data, idempotency_key, start_at, tags, priority, created_at, due_at, ${KEY_COLUMNS}${traced ? ', traceparent' : ''})
     SELECT $1, $2, 'pending', $3::jsonb, $4, $5::timestamptz, ${TAGS_FROM_JSON('$6::jsonb')}, $7, statement_timestamp(), greatest(statement_timestamp(), $5::timestamptz),
            ${keyValues('$3::jsonb')}${traced ? ', $8::text' : ''}
       FROM (SELECT) one ${TASK_JOIN('$2')}
     ${INSERT_TAIL}, ${notifyWorkSql('task', 'due_at')} IS NULL AS _n`;
const ONE_ROW_SQL = oneRowSql(false);
const ONE_ROW_TRACED_SQL = oneRowSql(true);

/** One round of insertExecutions: undefined for an item whose key's row was deleted before the read-back. */
async function insertOnce(run: Runner, items: readonly NewExecution[]): Promise<Array<ScheduleResult | undefined>> {
  const ids = items.map(() => newExecutionId());
  const columns = [ids, items.map((i) => i.task), items.map((i) => toJsonb(i.data ?? null)), items.map((i) => i.idempotencyKey ?? null)];
  const startAts = items.map((i) => i.startAt?.toISOString() ?? null);
  const tags = items.map((i) => (i.tags !== undefined && i.tags.length > 0 ? JSON.stringify(i.tags) : null));
  const priorities = items.map((i) => i.priority ?? 0);
  const traceparents = items.some((i) => i.traceparent !== undefined) ? items.map((i) => i.traceparent ?? null) : undefined;
  let inserted: ScheduledRow[];
  if (run.unprepared && items.length === 1) {
    const one = [...columns.map((c) => c[0]), startAts[0], tags[0], priorities[0]];
    inserted = traceparents ? await run<ScheduledRow>('', ONE_ROW_TRACED_SQL, [...one, traceparents[0]]) : await run<ScheduledRow>('', ONE_ROW_SQL, one);
  } else if (traceparents) {
    inserted = await run<ScheduledRow>('stepwise_schedule_executions_traced', INSERT_TRACED_SQL, [...columns, startAts, tags, priorities, traceparents]);
  } else if (startAts.some((at) => at !== null) || tags.some((t) => t !== null) || priorities.some((p) => p !== 0)) {
    inserted = await run<ScheduledRow>('stepwise_schedule_executions_full', INSERT_FULL_SQL, [...columns, startAts, tags, priorities]);
  } else {
    inserted = await run<ScheduledRow>('stepwise_schedule_executions', INSERT_SQL, columns);
  }
  const byId = new Map(inserted.map((r) => [r.id, r]));
  const missingKeys = items
    .filter((item, i) => !byId.has(ids[i]) && item.idempotencyKey !== undefined)
    .map((i) => i.idempotencyKey as string);
  const existing = new Map<string, ScheduledRow>();
  if (missingKeys.length > 0) {
    const rows = await run<ScheduledRow & { idempotency_key: string }>(
      'stepwise_schedule_existing',
      `SELECT ${SCHEDULED_COLUMNS}, idempotency_key FROM stepwise.executions WHERE idempotency_key = ANY($1::text[])`,
      [missingKeys],
    );
    for (const r of rows) existing.set(r.idempotency_key, r);
  }
  return items.map((item, i) => {
    const row = byId.get(ids[i]);
    if (row) return { execution: toScheduledRecord(row), created: true };
    const prior = item.idempotencyKey === undefined ? undefined : existing.get(item.idempotencyKey);
    if (!prior) {
      if (item.idempotencyKey === undefined) throw new Error('an insert without an idempotency key returned no row');
      return undefined;
    }
    return { execution: toScheduledRecord(prior), created: false };
  });
}

/**
 * A schedule of a debounced task: while an execution of the task with the same debounce key is still
 * pending and unclaimed, it takes this schedule's data, start, priority and tags instead of a second
 * execution being made, and its start moves to the task's period from now (or `start_at`, when
 * later). The unique index on the unclaimed execution of each key (migration 015) makes concurrent
 * schedules meet on one row; a claim clears the key, so a schedule after the start makes a new one.
 * The period and the key's pointer are read from the task's row, as the workers registered them.
 * Undefined when the task is not debounced (any more): the caller schedules as usual. The latest
 * schedule's traceparent ($8) is kept, as its data is; one without keeps the one before.
 */
const DEBOUNCED_SQL = `INSERT INTO stepwise.executions AS e (id, task, status, data, idempotency_key, start_at, tags, priority, created_at, due_at, ${KEY_COLUMNS}, debounce_key, traceparent)
     SELECT $1, $2, 'pending', $3::jsonb, $4, $5::timestamptz, ${TAGS_FROM_JSON('$6::jsonb')}, $7, statement_timestamp(),
            greatest(statement_timestamp() + make_interval(secs => (tk.debounce->>'period_ms')::float8 / 1000), $5::timestamptz),
            ${keyValues('$3::jsonb')}, coalesce($3::jsonb #>> tk.debounce_key_path, ''), $8::text
       FROM stepwise.tasks tk WHERE tk.name = $2 AND tk.debounce IS NOT NULL
     ON CONFLICT (task, debounce_key) WHERE debounce_key IS NOT NULL AND status = 'pending' DO UPDATE
        SET data = EXCLUDED.data, due_at = EXCLUDED.due_at, start_at = EXCLUDED.start_at, priority = EXCLUDED.priority,
            tags = coalesce(EXCLUDED.tags, e.tags), idempotency_key = coalesce(e.idempotency_key, EXCLUDED.idempotency_key),
            concurrency_key = EXCLUDED.concurrency_key, rate_key = EXCLUDED.rate_key, traceparent = coalesce(EXCLUDED.traceparent, e.traceparent)
     RETURNING ${SCHEDULED_COLUMNS}, xmax <> 0 AS debounced`;

export async function insertDebounced(db: Db, item: NewExecution): Promise<ScheduleResult | undefined> {
  return insertDebouncedWith(poolRunner(db), item);
}

/** insertDebounced through a runner of onCallerConnection (schedule() in the caller's transaction). */
export async function insertDebouncedWith(run: Runner, item: NewExecution): Promise<ScheduleResult | undefined> {
  if (item.idempotencyKey !== undefined) {
    const [prior] = await run<ScheduledRow>('stepwise_schedule_by_key', `SELECT ${SCHEDULED_COLUMNS} FROM stepwise.executions WHERE idempotency_key = $1`, [item.idempotencyKey]);
    if (prior) return { execution: toScheduledRecord(prior), created: false };
  }
  const [row] = await run<ScheduledRow & { debounced: boolean }>('stepwise_schedule_debounced_v2', DEBOUNCED_SQL, [
    newExecutionId(),
    item.task,
    toJsonb(item.data ?? null),
    item.idempotencyKey ?? null,
    item.startAt?.toISOString() ?? null,
    item.tags !== undefined && item.tags.length > 0 ? JSON.stringify(item.tags) : null,
    item.priority ?? 0,
    item.traceparent ?? null,
  ]);
  if (!row) return undefined;
  return { execution: toScheduledRecord(row), created: !row.debounced, debounced: row.debounced };
}

/** An execution row with its open event waits (see OPEN_WAITS). */
type RowWithWaits = ExecutionRow & { open_waits: Array<{ event_name: string; since: string; timeout_at: string | null }> | null };

/**
 * The event waits a waiting execution `e` has open, earliest first, as a jsonb array (NULL when it is
 * not waiting): a handler may wait for several events at once, each an open `event` step.
 */
const OPEN_WAITS = `CASE WHEN e.status = 'waiting' THEN (
              SELECT jsonb_agg(jsonb_build_object('event_name', s.event_name, 'since', s.started_at, 'timeout_at', s.wake_at) ORDER BY s.started_at, s.seq)
                FROM stepwise.steps s
               WHERE s.execution_id = e.id AND s.kind = 'event' AND NOT s.completed AND s.outcome IS NULL) END AS open_waits`;

function rowWithWaitsToExecution(row: RowWithWaits): ExecutionRecord {
  const execution = rowToExecution(row);
  execution.openWaits = (row.open_waits ?? []).map((w) => ({ eventName: w.event_name, since: new Date(w.since), timeoutAt: w.timeout_at === null ? null : new Date(w.timeout_at) }));
  return execution;
}

/** One execution, with the event waits it has open when it is waiting. */
export async function getExecution(db: Db, id: string): Promise<ExecutionRecord | undefined> {
  const rows = await preparedRows<RowWithWaits>(db, 'stepwise_get_execution_v2', `SELECT e.*, ${OPEN_WAITS} FROM stepwise.executions e WHERE e.id = $1`, [id]);
  return rows[0] ? rowWithWaitsToExecution(rows[0]) : undefined;
}

/**
 * Reads several executions at once, each as getExecution reads it (the long-poll and stream fan-out
 * reads all the executions a notification names in one query).
 */
export async function getExecutions(db: Db, ids: readonly string[]): Promise<ExecutionRecord[]> {
  if (ids.length === 0) return [];
  const rows = await queryRows<RowWithWaits>(db, `SELECT e.*, ${OPEN_WAITS} FROM stepwise.executions e WHERE e.id = ANY(?::uuid[])`, [ids]);
  return rows.map(rowWithWaitsToExecution);
}

/** What the changes stream tells of an execution: its task and its status now. */
export type ExecutionStatusRecord = Pick<ExecutionRecord, 'id' | 'task' | 'status'>;

/** The task and status of several executions, in one query (the changes stream's read). */
export async function getExecutionStatuses(db: Db, ids: readonly string[]): Promise<ExecutionStatusRecord[]> {
  if (ids.length === 0) return [];
  return queryRows<ExecutionStatusRecord>(db, 'SELECT id, task, status FROM stepwise.executions WHERE id = ANY(?::uuid[])', [ids]);
}

export interface ListFilter {
  status?: ExecutionStatus;
  task?: string;
  /** Only the children of this execution. */
  parentId?: string;
  /** Only executions that carry every one of these tags. */
  tags?: readonly string[];
  idempotencyKey?: string;
  /** Created at or after this instant. */
  createdAfter?: Date;
  /** Created before this instant. */
  createdBefore?: Date;
  limit: number;
  offset: number;
  order: 'asc' | 'desc';
  /** Only executions after this position in the list's order (keyset paging; see ListPosition). */
  after?: ListPosition;
}

/**
 * Where an execution stands in a list's order: its creation instant to the microsecond, as
 * PostgreSQL keeps it (ISO text in UTC: a JavaScript Date would round it to the millisecond and make
 * pages skip or repeat executions created in the same millisecond), and its id.
 */
export interface ListPosition {
  createdAt: string;
  id: string;
}

export interface ListPage {
  items: ExecutionRecord[];
  total: number;
  /** Where the page's last execution stands, when more executions follow it; else undefined. */
  next?: ListPosition;
}

/** A condition of a list's WHERE and the values of its placeholders. */
interface Condition {
  sql: string;
  bindings: unknown[];
}

type PartFilter = Omit<ListFilter, 'limit' | 'offset' | 'order'>;

/**
 * The filters every part of a list applies, each served by an index that leads to (created_at, id):
 * the task index; the range of the created or status index; the tag index (migration 012), a GIN index
 * that `@>` (every tag asked for) can search. Instants are sent as ISO text, as pg would send a Date in
 * the process's local time zone.
 */
function commonConditions(filter: PartFilter): Condition[] {
  const conditions: Condition[] = [];
  if (filter.task !== undefined) {
    conditions.push(ordersByTask(filter) ? { sql: 'task >= ? AND task <= ?', bindings: [filter.task, filter.task] } : { sql: 'task = ?', bindings: [filter.task] });
  }
  if (filter.tags !== undefined && filter.tags.length > 0) conditions.push({ sql: 'tags @> ?::text[]', bindings: [[...filter.tags]] });
  if (filter.createdAfter !== undefined) conditions.push({ sql: 'created_at >= ?::timestamptz', bindings: [filter.createdAfter.toISOString()] });
  if (filter.createdBefore !== undefined) conditions.push({ sql: 'created_at < ?::timestamptz', bindings: [filter.createdBefore.toISOString()] });
  return conditions;
}

function toPart(conditions: Condition[]): { where: string; bindings: unknown[] } {
  return { where: conditions.map((c) => c.sql).join(' AND '), bindings: conditions.flatMap((c) => c.bindings) };
}

/**
 * The parts of the table a list reads, each through its own index (see migration 003): running rows
 * only through the running index, all others through the list indexes, which leave running rows out.
 * A status is written into the text, never bound, so the planner can prove which partial index serves
 * it; the status comes from the checked enum, and is escaped all the same.
 */
function listParts(filter: PartFilter): Array<{ where: string; bindings: unknown[] }> {
  const common = commonConditions(filter);
  const status = (sql: string): Condition => ({ sql, bindings: [] });
  const given = filter.status ? [status(`status = ${pg.escapeLiteral(filter.status)}`)] : [];
  // Indexes that hold every status serve one part: one execution's children come from the parent index
  // (migration 007), the execution that holds a key from the key's unique index (at most one row).
  if (filter.idempotencyKey !== undefined || filter.parentId !== undefined) {
    const key = filter.idempotencyKey !== undefined ? [{ sql: 'idempotency_key = ?', bindings: [filter.idempotencyKey] }] : [];
    const parent = filter.parentId !== undefined ? [{ sql: 'parent_id = ?::uuid', bindings: [filter.parentId] }] : [];
    return [toPart([...key, ...parent, ...given, ...common])];
  }
  if (filter.status) return [toPart([...given, ...common])];
  return [toPart([status("status <> 'running'"), ...common]), toPart([status("status = 'running'"), ...common])];
}

/**
 * The list's total. Narrowed by nothing but task and status, it is the maintained count (migration
 * 018), whose cost does not grow with the table; any other filter counts the rows it matches, through
 * the index that serves that filter.
 */
function totalSql(filter: ListFilter, parts: Array<{ where: string; bindings: unknown[] }>): { sql: string; bindings: unknown[] } {
  const narrowed = filter.tags?.length || filter.idempotencyKey !== undefined || filter.parentId !== undefined;
  if (!narrowed && filter.createdAfter === undefined && filter.createdBefore === undefined) {
    return maintainedCountSql({ task: filter.task, status: filter.status });
  }
  return {
    sql: parts.map((p) => `(SELECT count(*) FROM stepwise.executions WHERE ${p.where})`).join(' + '),
    bindings: parts.flatMap((p) => p.bindings),
  };
}

/**
 * Whether a list's parts go by the task index in task order: a task and no status, parent or key.
 * `task = ?` would leave the planner free to walk the creation index instead and filter, reading every
 * other task's rows on the way (its estimate differs by a hair; at ten million rows, a task holding
 * one execution in twenty took 28 ms that way against 4 ms through its own index). The planner drops
 * a sort column that an equality fixes, so the task is asked for as a range of one value, and ordered
 * by first: then only (task, created_at, id) yields the order without sorting the task's every row.
 */
function ordersByTask(filter: PartFilter): boolean {
  return filter.task !== undefined && filter.status === undefined && filter.idempotencyKey === undefined && filter.parentId === undefined;
}

/**
 * The condition that keeps a part to the executions after `after` in the list's order, written as a
 * row comparison over the columns of the index that serves the part (task first when it goes by the
 * task index), so the index scan starts at the position instead of stepping over what lies before it.
 */
function afterCondition(filter: ListFilter, after: ListPosition): Condition {
  const op = filter.order === 'asc' ? '>' : '<';
  if (ordersByTask(filter)) return { sql: `(task, created_at, id) ${op} (?, ?::timestamptz, ?::uuid)`, bindings: [filter.task, after.createdAt, after.id] };
  return { sql: `(created_at, id) ${op} (?::timestamptz, ?::uuid)`, bindings: [after.createdAt, after.id] };
}

/** An instant as ISO text in UTC to the microsecond: what a ListPosition holds. */
const MICROSECOND_INSTANT = `to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** The statement of listExecutions (exported for the tests that read its plans). */
export function listStatement(filter: ListFilter): { sql: string; bindings: unknown[] } {
  const parts = listParts(filter);
  const dir = filter.order === 'asc' ? 'ASC' : 'DESC';
  const order = `ORDER BY created_at ${dir}, id ${dir}`;
  const partOrder = ordersByTask(filter) ? `ORDER BY task ${dir}, created_at ${dir}, id ${dir}` : order;
  // One row past the page tells whether another page follows.
  const rows = filter.limit + 1;
  const after = filter.after && afterCondition(filter, filter.after);
  const paged = (p: { where: string; bindings: unknown[] }) => (after ? { where: `${p.where} AND ${after.sql}`, bindings: [...p.bindings, ...after.bindings] } : p);
  const bindings: unknown[] = [];
  let from: string;
  if (parts.length === 1) {
    const p = paged(parts[0]);
    from = `stepwise.executions WHERE ${p.where}`;
    bindings.push(...p.bindings);
  } else {
    const ranges = parts.map((part) => {
      const p = paged(part);
      bindings.push(...p.bindings, filter.offset + rows);
      return `(SELECT id, created_at FROM stepwise.executions WHERE ${p.where} ${partOrder} LIMIT ?)`;
    });
    from = `(${ranges.join(' UNION ALL ')}) u`;
  }
  bindings.push(rows, filter.offset);
  const total = totalSql(filter, parts);
  bindings.push(...total.bindings);
  // The page's ids first, then its rows: a deep page steps over offset rows as index entries (often
  // without touching the table), not as whole rows with their data.
  const sql = `WITH ids AS (SELECT id, created_at FROM ${from} ${order} LIMIT ? OFFSET ?),
     page AS (SELECT e.*, ${MICROSECOND_INSTANT} AS _position FROM ids JOIN stepwise.executions e ON e.id = ids.id),
     total AS (SELECT (${total.sql})::bigint AS total)
     SELECT page.*, total.total FROM total LEFT JOIN page ON true
      ORDER BY page.created_at ${dir}, page.id ${dir}`;
  return { sql, bindings };
}

/**
 * A page ordered by (created_at, id), so equal timestamps never make pages skip or repeat rows. Each part
 * of the table (listParts) yields the ids of its first offset + limit rows in that order from its index,
 * and the page is the rows of the ids taken from their merge; the total is the sum of the parts' counts. Page and total come from
 * one statement, hence one snapshot, in one round trip (an offset past the end still returns the total).
 * With `after`, every part starts after that position (keyset paging: a deep page costs what the first does).
 */
export async function listExecutions(db: Db, filter: ListFilter): Promise<ListPage> {
  const { sql, bindings } = listStatement(filter);
  const rows = await queryRows<ExecutionRow & { total: number; _position: string }>(db, sql, bindings);
  const total = rows.length > 0 ? Number(rows[0].total) : 0;
  // An empty page still yields one row, with the total and no execution.
  const found = rows.filter((r) => r.id !== null);
  const page = found.slice(0, filter.limit);
  const last = page[page.length - 1];
  return { items: page.map(rowToExecution), total, next: found.length > filter.limit ? { createdAt: last._position, id: last.id } : undefined };
}

export type DeliverOutcome = { kind: 'delivered'; execution: ExecutionRecord } | { kind: 'not_waiting' };

/** The statement of deliverEvent, over ($1 id, $2 event name, $3 payload). */
const DELIVER_SQL = `WITH target AS (
       SELECT id FROM stepwise.executions WHERE id = $1 AND status = 'waiting' FOR UPDATE
     ),
     step AS (
       UPDATE stepwise.steps s SET completed = true, result = json_build_object('payload', $3::json), completed_at = now()
        WHERE s.execution_id = (SELECT id FROM target) AND s.seq = (
                SELECT o.seq FROM stepwise.steps o
                 WHERE o.execution_id = (SELECT id FROM target) AND o.kind = 'event' AND o.event_name = $2
                   AND NOT o.completed AND o.outcome IS NULL AND (o.wake_at IS NULL OR o.wake_at > now())
                 ORDER BY o.seq DESC LIMIT 1)
          AND NOT s.completed AND s.outcome IS NULL
       RETURNING s.seq
     ),
     delivered AS (
       UPDATE stepwise.executions e
          SET due_at = now(), steps_completed = e.steps_completed + 1
        WHERE e.id = (SELECT id FROM target) AND EXISTS (SELECT 1 FROM step)
       RETURNING e.*
     )
     SELECT delivered.*, pg_notify('${CHANNEL_WORK}', delivered.task) IS NULL AS _n FROM delivered`;

/**
 * Delivers an event in one statement: it locks the execution while it waits, completes its latest
 * open wait for this event (the one the handler waits on now: an older one was left behind) whose deadline has not passed (a delivery after the timeout loses to it),
 * makes the execution due and wakes the workers. Of two concurrent deliveries the second waits for
 * the row lock; its update of the wait's step then finds the step completed and delivers nothing.
 * The caller validates the payload first (an execution's task never changes).
 */
export async function deliverEvent(db: Db, id: string, eventName: string, payload: unknown): Promise<DeliverOutcome> {
  const rows = await preparedRows<ExecutionRow>(db, 'stepwise_deliver_event_v2', DELIVER_SQL, [id, eventName, toJsonb(payload ?? null)]);
  return rows[0] ? { kind: 'delivered', execution: rowToExecution(rows[0]) } : { kind: 'not_waiting' };
}

/** The API's answer to a delivery, as kept for a repeat of its idempotency key. */
export interface DeliveryAnswer {
  status: 'delivered';
  execution_id: string;
  event_name: string;
  execution_status: ExecutionStatus;
}

export type KeyedDeliverOutcome = { kind: 'delivered'; answer: DeliveryAnswer } | { kind: 'repeated'; answer: DeliveryAnswer } | { kind: 'not_waiting' };

/** The answer a delivery with this idempotency key made, if one did. */
export async function findKeyedDelivery(db: Db, id: string, eventName: string, key: string): Promise<DeliveryAnswer | undefined> {
  const rows = await queryRows<{ answer: DeliveryAnswer }>(
    db,
    'SELECT answer FROM stepwise.event_deliveries WHERE execution_id = ? AND event_name = ? AND idempotency_key = ?',
    [id, eventName, key],
  );
  const kept = rows[0]?.answer;
  // jsonb keeps keys in its own order: the answer is rebuilt in the first one's, byte for byte.
  return kept && { status: kept.status, execution_id: kept.execution_id, event_name: kept.event_name, execution_status: kept.execution_status };
}

const REPEATED = Symbol('repeated');
const NOT_DELIVERED = Symbol('not delivered');

/**
 * deliverEvent under the client's idempotency key, in one transaction: it first takes the key (an
 * insert into event_deliveries, whose primary key makes a concurrent delivery with the same key wait
 * for this one and then find it), then delivers, then keeps the answer. Nothing delivered, nothing
 * kept: the transaction rolls back and the key stays free. A key another delivery took answers that
 * delivery's answer.
 */
export async function deliverEventOnce(db: Db, id: string, eventName: string, payload: unknown, key: string): Promise<KeyedDeliverOutcome> {
  try {
    const answer = await withReadCommitted(db, async (connection) => {
      const taken = await connection.query(
        `INSERT INTO stepwise.event_deliveries (execution_id, event_name, idempotency_key, answer)
         SELECT id, $2, $3, '{}'::jsonb FROM stepwise.executions WHERE id = $1
         ON CONFLICT DO NOTHING RETURNING 1`,
        [id, eventName, key],
      );
      if (taken.rowCount === 0) throw REPEATED;
      const rows = (await connection.query<ExecutionRow>(DELIVER_SQL, [id, eventName, toJsonb(payload ?? null)])).rows;
      if (!rows[0]) throw NOT_DELIVERED;
      const delivered: DeliveryAnswer = { status: 'delivered', execution_id: rows[0].id, event_name: eventName, execution_status: rows[0].status };
      await connection.query('UPDATE stepwise.event_deliveries SET answer = $4 WHERE execution_id = $1 AND event_name = $2 AND idempotency_key = $3', [id, eventName, key, delivered]);
      return delivered;
    });
    return { kind: 'delivered', answer };
  } catch (err) {
    if (err === NOT_DELIVERED) return { kind: 'not_waiting' };
    if (err !== REPEATED) throw err;
    // The key was taken by a delivery that committed (the insert waited for it), or the execution is gone.
    const answer = await findKeyedDelivery(db, id, eventName, key);
    return answer ? { kind: 'repeated', answer } : { kind: 'not_waiting' };
  }
}
