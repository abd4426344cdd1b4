import { createHash } from 'node:crypto';
import pg from 'pg';
import { CHANNEL_CHANGED, notifyIds } from '../channels';
import { preparedRows, preparedRowsBeforeCommit, type Db } from '../db';
import type { ExecutionRecord, ExecutionRow } from '../rows';
import { COMPLETE_JOINED_CTES, completeExecutions, completionParams, type Completion } from './complete';
import { CLAIM, statusIn, writes } from './moves';

/** The due rows a claim reads: new and resumed ones from the claim's index, expired leases from the running index. */
const FRESH = statusIn(CLAIM.from.filter((s) => s !== 'running'));
const TAKEN_OVER = statusIn(CLAIM.from.filter((s) => s === 'running'));

/** What a worker needs of an execution it claimed (the claim returns no more: parsing is per row). */
export type ClaimedRecord = Pick<ExecutionRecord, 'id' | 'task' | 'status' | 'data' | 'attempt' | 'attemptsSinceProgress' | 'stepsCompleted' | 'leaseToken' | 'parentId' | 'traceparent'>;

/**
 * A task a worker claims, with the version of its code the worker serves ('' for a task defined
 * without one); a bare name serves the unversioned task. A claim takes the executions pinned to this
 * version, never another version's, and, unless `startsNew` is false (another version is current,
 * see startingTasks), those that never started, which it pins to this version.
 */
export type ClaimTask = string | { readonly name: string; readonly version: string; readonly startsNew?: boolean };

/**
 * The claim index's version column (migration 016): '*' for an execution no version started yet,
 * which no version is named (see TASK_VERSION). Ranges compare it with `=`, so that each is read in
 * the index's order.
 */
export const PIN_KEY = `coalesce(task_version, '*')`;
export const UNPINNED = `'*'`;

const servedName = (t: ClaimTask) => (typeof t === 'string' ? t : t.name);
const servedVersion = (t: ClaimTask) => (typeof t === 'string' ? '' : t.version);
/** Whether the claim takes executions that never started. */
export const startsNew = (t: ClaimTask) => typeof t === 'string' || t.startsNew !== false;

/**
 * The version a claim pins an unpinned execution of task `task` (a SQL expression) to, for a task
 * list: a literal when every task has the same version, else a CASE over the task.
 */
export function pinnedVersionSql(tasks: readonly ClaimTask[], task: string): string {
  const versions = new Map(tasks.map((t) => [servedName(t), servedVersion(t)]));
  const distinct = new Set(versions.values());
  if (distinct.size <= 1) return pg.escapeLiteral([...distinct][0] ?? '');
  return `CASE ${task} ${[...versions].map(([n, v]) => `WHEN ${pg.escapeLiteral(n)} THEN ${pg.escapeLiteral(v)}`).join(' ')} END`;
}

/** A claimed execution together with what the claim saw. */
export interface ClaimedExecution {
  execution: ClaimedRecord;
  /** Status before the claim: 'running' means a lease takeover, 'waiting' a resume. */
  previousStatus: 'pending' | 'running' | 'waiting';
  /** The database's clock at the claim, for comparing durable deadlines without clock skew. */
  claimedAt: Date;
  /**
   * The local clock just before the claim was sent: with `claimedAt`, the database's time later on is
   * at most claimedAt + (now - claimedLocally). The database read its clock after this instant, so the
   * estimate never runs behind it, and a durable deadline set from it may come late by the claim's
   * round trip, never early. Taken then, not on arrival (a busy event loop reads rows late) nor when a
   * handler starts, which a prefetched execution may do much later.
   */
  claimedLocally: number;
  /** When the execution could first start: when it was scheduled, or the later `start_at` it asked for. */
  readyAt: Date;
  /** When it was first claimed, or first claimed after an operator's retry: a task's `timeout` runs from here. */
  startedAt: Date;
  /** Its `start_at` as given (a cron fire time, say), else when it was scheduled: ctx.scheduledFor. */
  scheduledFor: Date;
}


/**
 * Claims up to `limit` due executions of the given tasks in one statement.
 *
 * Invariant: an execution is held by at most one live lease. SKIP LOCKED lets concurrent claimers take
 * disjoint rows without waiting on each other; every claim draws a fresh lease_token, so a worker whose
 * lease expired (and was taken over here) can no longer write: all writes match on the token. Due times
 * compare against the database's now(), never a worker's clock.
 */
export async function claimExecutions(db: Db, tasks: readonly ClaimTask[], limit: number, leaseMs: number, workerId: string | null = null): Promise<ClaimedExecution[]> {
  if (limit <= 0 || tasks.length === 0) return [];
  const statements = claimStatements(tasks);
  const sent = Date.now();
  const rows = await preparedRows<ClaimRow>(db, statements.claimName, statements.claimSql, [limit, leaseMs / 1000, workerId]);
  return rows.map(toClaimed(sent));
}

/**
 * claimExecutions, but the claimed executions come back before the claim's COMMIT is acknowledged
 * (`committed` settles with it): a worker can start handlers while the commit's WAL flush is under
 * way. Safe because every write a handler makes is fenced by the lease token, and the claimed rows stay
 * locked until the commit: a write waits for it and lands only if the claim did.
 */
export async function claimExecutionsBeforeCommit(
  db: Db,
  tasks: readonly ClaimTask[],
  limit: number,
  leaseMs: number,
  workerId: string | null = null,
): Promise<{ claimed: ClaimedExecution[]; committed: Promise<void> }> {
  if (limit <= 0 || tasks.length === 0) return { claimed: [], committed: Promise.resolve() };
  const statements = claimStatements(tasks);
  const sent = Date.now();
  const { rows, commit } = await preparedRowsBeforeCommit<ClaimRow>(db, statements.claimName, statements.claimSql, [limit, leaseMs / 1000, workerId]);
  return { claimed: rows.map(toClaimed(sent)), committed: commit };
}

/** Instants come as epoch milliseconds: a number parses in a fraction of a timestamp's time. */
export type ClaimRow = Pick<ExecutionRow, 'id' | 'task' | 'status' | 'data' | 'attempt' | 'attempts_since_progress' | 'steps_completed' | 'lease_token' | 'parent_id' | 'traceparent'> & {
  started_ms: number;
  ready_ms: number;
  scheduled_ms: number;
  previous_status: ClaimedExecution['previousStatus'];
  claimed_ms: number;
};

/** The claim's result columns, over the CTEs `claimed` and `due` (see claimCtes). */
/** `claimed_ms` reads the clock as the rows are returned (now() is the statement's start, earlier by the claim's own time). */
export const CLAIM_COLUMNS = `claimed.*, due.status AS previous_status, (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS claimed_ms`;

/** A worker's two claiming statements, named and written for its task list (see claimStatements). */
interface ClaimStatements {
  /** The claim: $1 limit, $2 lease seconds. */
  claimName: string;
  claimSql: string;
  /** Completions plus the claim: $1-$4 the completions (see completionParams), $5 limit, $6 lease seconds. */
  completeName: string;
  completeSql: string;
}

const claimStatementsByTasks = new Map<string, ClaimStatements>();
/** By the caller's array: a worker passes the same task list to every claim, so it is keyed once. */
const claimStatementsByArray = new WeakMap<readonly ClaimTask[], ClaimStatements>();

/**
 * The claim statements of one task list, with the tasks written into the text rather than passed as a
 * parameter: PostgreSQL then knows how many ranges of the index a claim reads, and after five runs
 * keeps one generic plan instead of planning every claim again (with an array parameter it assumed
 * ten tasks, found the generic plan dearer and re-planned each time, a large share of an idle claim).
 * A worker's task list is fixed, so each worker prepares its statements once per connection, under a
 * name derived from the list.
 */
export function claimStatements(tasks: readonly ClaimTask[]): ClaimStatements {
  const known = claimStatementsByArray.get(tasks);
  if (known) return known;
  const { key, list, pin, suffix } = taskListSql(tasks);
  let statements = claimStatementsByTasks.get(key);
  if (!statements) {
    statements = {
      claimName: `stepwise_claim_${suffix}`,
      claimSql: `WITH ${claimCtes(list, pin, '$1', '$2', '$3', 'TRUE')}
     SELECT ${CLAIM_COLUMNS}, (SELECT count(*) FROM claim_notified) AS _c FROM claimed JOIN due USING (id)`,
      completeName: `stepwise_complete_and_claim_${suffix}`,
      completeSql: `WITH ${COMPLETE_JOINED_CTES},
     ${claimCtes(list, pin, '$5', '$6', '$7', 'id <> ALL($1::uuid[])')}
     SELECT c.*, CASE WHEN row_number() OVER () = 1 THEN d.completed_ids END AS completed_ids, (SELECT count(*) FROM notified) AS _n,
            (SELECT count(*) FROM claim_notified) AS _c
       FROM (SELECT string_agg(id::text, ',') AS completed_ids FROM done) d
       LEFT JOIN (SELECT ${CLAIM_COLUMNS} FROM claimed JOIN due USING (id)) c ON true`,
    };
    claimStatementsByTasks.set(key, statements);
  }
  claimStatementsByArray.set(tasks, statements);
  return statements;
}

/**
 * A claim's task list written as SQL: `list` the unnest of (name, version, starts_new) rows, `pin`
 * the version an unpinned execution is pinned to, `key` and `suffix` what names its statements.
 */
function taskListSql(tasks: readonly ClaimTask[]): { key: string; list: string; pin: string; suffix: string } {
  const served = [...new Map(tasks.map((t) => [servedName(t), [servedVersion(t), startsNew(t)] as const]))].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const key = JSON.stringify(served);
  const list = `unnest(ARRAY[${served.map(([n]) => pg.escapeLiteral(n)).join(', ')}]::text[], ARRAY[${served.map(([, [v]]) => pg.escapeLiteral(v)).join(', ')}]::text[], ARRAY[${served.map(([, [, s]]) => String(s)).join(', ')}]::boolean[])`;
  const pin = pinnedVersionSql(tasks, 'e.task');
  return { key, list, pin, suffix: createHash('sha256').update(key).digest('hex').slice(0, 16) };
}

const fillStatements = new Map<string, { name: string; sql: string }>();

/** A claimed execution of claimForWorkers, with the worker it went to. */
export interface ClaimedForWorker extends ClaimedExecution {
  workerId: string;
}

/**
 * Claims, in one statement, due executions of `tasks` for several workers at once (the API server's
 * long-polls): `workerIds` holds one worker id per place, a worker's id repeated as many times as it
 * has room, and the claim takes at most that many. Each execution claimed takes one place, and is
 * leased to (and attributed to) the worker of that place. Everything else is claimExecutions'.
 */
export async function claimForWorkers(db: Db, tasks: readonly ClaimTask[], workerIds: readonly string[], leaseMs: number): Promise<ClaimedForWorker[]> {
  if (workerIds.length === 0 || tasks.length === 0) return [];
  const { key, list, pin, suffix } = taskListSql(tasks);
  let statement = fillStatements.get(key);
  if (!statement) {
    // The place of a row: its position among the due rows (one scan of the materialized CTE).
    const place = 'array_position(ARRAY(SELECT id FROM due), e.id)';
    statement = {
      name: `stepwise_claim_for_workers_${suffix}`,
      sql: `WITH ${claimCtes(list, pin, '$1', '$2', `($3::uuid[])[${place}]`, 'TRUE')}
     SELECT ${CLAIM_COLUMNS}, ($3::uuid[])[array_position(ARRAY(SELECT id FROM due), claimed.id)] AS place_worker,
            (SELECT count(*) FROM claim_notified) AS _c
       FROM claimed JOIN due USING (id)`,
    };
    fillStatements.set(key, statement);
  }
  const sent = Date.now();
  const rows = await preparedRows<ClaimRow & { place_worker: string }>(db, statement.name, statement.sql, [workerIds.length, leaseMs / 1000, workerIds]);
  return rows.map((r) => ({ ...toClaimed(sent)(r), workerId: r.place_worker }));
}

/** Maps a claimed row, for a claim sent at `sent` on the local clock. */
export const toClaimed = (sent: number) => (r: ClaimRow): ClaimedExecution => ({
  execution: {
    id: r.id,
    task: r.task,
    status: r.status,
    data: r.data,
    attempt: r.attempt,
    attemptsSinceProgress: r.attempts_since_progress,
    stepsCompleted: r.steps_completed,
    leaseToken: r.lease_token,
    parentId: r.parent_id,
    traceparent: r.traceparent ?? null,
  },
  previousStatus: r.previous_status,
  claimedAt: new Date(r.claimed_ms),
  claimedLocally: sent,
  readyAt: new Date(r.ready_ms),
  startedAt: new Date(r.started_ms),
  scheduledFor: new Date(r.scheduled_ms),
});

/**
 * The CTEs `due`, `claimed` and `claim_notified` of a claim. `due` takes the oldest due rows of each
 * task in turn, skipping rows other claimers hold, and keeps the `limit` oldest of them: the rows of
 * tasks this worker does not serve are never read. Each task reads three ranges: pending and waiting
 * rows from the claim's index, first those no version has started and then those pinned to the
 * worker's version (so rows of a version nobody serves are never stepped over, see migration 016),
 * and running rows whose lease expired (takeovers) from the running index (see migration 003); locking is not allowed on a UNION itself, so each range locks inside its own
 * subquery. Rows read beyond the kept ones stay locked until this statement's commit and are then free
 * again (only when several ranges have work due at once). The outer UPDATE finds the rows by primary
 * key (id = ANY), never by joining the CTE, which the planner would turn into a scan of the whole
 * table. SET expressions read the row's old values. `exclude` is an extra condition on the due rows;
 * `pin` the version an unpinned row is pinned to.
 * `claim_notified` tells API servers (streams, the changes stream) that the claimed executions run now:
 * one NOTIFY per claim, not per execution.
 */
function claimCtes(tasks: string, pin: string, limit: string, leaseSecs: string, workerId: string, exclude: string): string {
  // `exclude` (the executions a fused completion finishes) can only match running rows: the takeover
  // range alone tests it, so pending rows are not each compared with a batch of hundreds of ids.
  const range = (status: string, version: string, order: string, excluded = 'TRUE') => `SELECT * FROM (
           SELECT id, status, due_at, priority, attempt, worker_id, attempt_started_at FROM stepwise.executions
            WHERE task = t.name AND ${version} AND ${status} AND due_at <= now() AND ${excluded}
            ORDER BY ${order}
            LIMIT ${limit}
            FOR UPDATE SKIP LOCKED
         ) r`;
  return `due AS (
       SELECT d.id, d.status, d.attempt, d.worker_id, d.attempt_started_at
         FROM (SELECT u.name, u.version, u.starts_new FROM ${tasks} AS u(name, version, starts_new)
                WHERE NOT EXISTS (SELECT 1 FROM stepwise.tasks p WHERE p.name = u.name AND p.paused)) AS t
       CROSS JOIN LATERAL (
         ${range(FRESH, `${PIN_KEY} = ${UNPINNED} AND t.starts_new`, 'priority DESC, due_at')}
         UNION ALL
         ${range(FRESH, `${PIN_KEY} = t.version`, 'priority DESC, due_at')}
         UNION ALL
         ${range(TAKEN_OVER, '(task_version IS NULL OR task_version = t.version)', 'due_at', exclude)}
       ) d
       ORDER BY d.priority DESC, d.due_at
       LIMIT ${limit}
     ),
     ${claimWrites('due', leaseSecs, workerId, pin)}`;
}

/**
 * The CTEs `lost` and `claimed` of a claim of the rows in `from` (id, status, attempt, worker_id,
 * attempt_started_at): a takeover records the lost attempt, and every row moves to running under a
 * fresh lease. A new attempt starts at `startedAt` (a rate-limited claim passes the instant it
 * stamped its starts with). An execution that never started is pinned to `version`, the claiming
 * worker's. The claim ends a debounce: a later schedule starts a new execution.
 */
export function claimWrites(from: string, leaseSecs: string, workerId: string, version: string, startedAt = 'now()'): string {
  return `lost AS (
       INSERT INTO stepwise.attempts (execution_id, attempt, worker_id, started_at, ended_at, outcome)
       SELECT id, attempt, worker_id, attempt_started_at, now(), 'lost' FROM ${from} WHERE status = 'running' AND attempt > 0
       ON CONFLICT (execution_id, attempt) DO NOTHING
     ),
     claimed AS (
       UPDATE stepwise.executions e
          SET status = ${writes(CLAIM, 'running')},
              attempt = e.attempt + CASE WHEN e.status = 'waiting' THEN 0 ELSE 1 END,
              attempts_since_progress = e.attempts_since_progress + CASE WHEN e.status = 'waiting' THEN 0 ELSE 1 END,
              lease_token = gen_random_uuid(),
              due_at = now() + make_interval(secs => ${leaseSecs}),
              started_at = coalesce(e.started_at, now()),
              -- NULL on a first claim or after a retry: the timeout counts from now. A resume or a takeover
              -- of an execution that a worker from before migration 021 claimed counts from its start.
              timeout_from = coalesce(e.timeout_from, CASE WHEN e.status = 'pending' THEN now() ELSE e.started_at END),
              worker_id = ${workerId}::uuid,
              attempt_started_at = CASE WHEN e.status = 'waiting' THEN e.attempt_started_at ELSE ${startedAt} END,
              task_version = coalesce(e.task_version, ${version}),
              wait_event_name = NULL, wait_since = NULL, wait_timeout_at = NULL, debounce_key = NULL
        WHERE e.id = ANY(ARRAY(SELECT id FROM ${from}))
        RETURNING e.id, e.task, e.status, e.data, e.attempt, e.attempts_since_progress, e.steps_completed, e.lease_token, e.parent_id, e.traceparent,
                  (extract(epoch FROM e.timeout_from) * 1000)::float8 AS started_ms,
                  (extract(epoch FROM greatest(e.created_at, e.start_at)) * 1000)::float8 AS ready_ms,
                  (extract(epoch FROM coalesce(e.start_at, e.created_at)) * 1000)::float8 AS scheduled_ms
     ),
     claim_notified AS (
       ${notifyIds(CHANNEL_CHANGED, 'claimed')}
     )`;
}

/** What a fused completion and claim did; `committed` settles when its commit does. */
export interface CompleteAndClaimResult {
  completed: Set<string>;
  claimed: ClaimedExecution[];
  committed: Promise<void>;
}

/**
 * Records completions and claims the next due executions in one statement, hence one round trip and
 * one commit where a busy worker would otherwise spend two. The claim skips the executions being
 * completed (an expired lease of this worker's could otherwise make one row both completed and
 * claimed in one statement). Answers as soon as the statement has run (see
 * claimExecutionsBeforeCommit): a worker starts the claimed handlers while the commit is flushed. The
 * completions are not durable until `committed` settles, so nobody may be told of them before.
 */
export async function completeAndClaimBeforeCommit(
  db: Db,
  items: readonly Completion[],
  tasks: readonly ClaimTask[],
  limit: number,
  leaseMs: number,
  workerId: string | null = null,
): Promise<CompleteAndClaimResult> {
  if (limit <= 0 || tasks.length === 0) return { completed: await completeExecutions(db, items), claimed: [], committed: Promise.resolve() };
  if (items.length === 0) {
    const claim = await claimExecutionsBeforeCommit(db, tasks, limit, leaseMs, workerId);
    return { completed: new Set(), claimed: claim.claimed, committed: claim.committed };
  }
  // One row at least (the LEFT JOIN), carrying the completed ids (comma-separated) on the first row only.
  const statements = claimStatements(tasks);
  const sent = Date.now();
  const { rows, commit } = await preparedRowsBeforeCommit<Partial<ClaimRow> & { completed_ids: string | null }>(
    db,
    statements.completeName,
    statements.completeSql,
    [...completionParams(items), limit, leaseMs / 1000, workerId],
  );
  const completedIds = rows[0]?.completed_ids;
  return {
    completed: new Set(completedIds ? completedIds.split(',') : []),
    claimed: rows.filter((r) => r.id !== null && r.id !== undefined).map((r) => toClaimed(sent)(r as ClaimRow)),
    committed: commit,
  };
}
