import { queryRows, type Db } from './db';
import { LIVE_WORKER, servedByLiveWorker } from './workers';

/**
 * The tasks of which a worker serving `served` (name → version) starts new executions: those whose
 * current version (the last registered) is its own, or is served by no live worker (its workers are
 * gone, as after a rollback: the executions must not wait for them). The others it leaves to the
 * current version's workers, and claims only what is pinned to its own: it drains.
 */
export async function startingTasks(db: Db, served: ReadonlyArray<{ name: string; version: string }>): Promise<Set<string>> {
  const rows = await queryRows<{ name: string }>(db, STARTING_SQL, [served.map((s) => s.name), served.map((s) => s.version)]);
  return new Set(rows.map((r) => r.name));
}

const STARTING_SQL = `SELECT t.name FROM stepwise.tasks t JOIN unnest(?::text[], ?::text[]) AS u(name, version) ON u.name = t.name
      WHERE coalesce(t.current_version, '') = u.version
         OR NOT ${servedByLiveWorker('t.name', "coalesce(t.current_version, '')")}`;

/**
 * A worker's heartbeat (see recordHeartbeat) and its read of startingTasks in one statement: an idle
 * worker then costs the database one transaction per beat, not two. `found` is false when its row
 * is gone (forgotten).
 */
export async function recordHeartbeatReadingStarting(
  db: Db,
  id: string,
  running: number,
  served: ReadonlyArray<{ name: string; version: string }>,
): Promise<{ found: boolean; starting: Set<string> }> {
  const [row] = await queryRows<{ found: boolean; starting: string[] }>(
    db,
    `WITH beat AS (UPDATE stepwise.workers SET last_seen_at = now(), running = ? WHERE worker_id = ? RETURNING 1)
     SELECT EXISTS (SELECT 1 FROM beat) AS found, ARRAY(${STARTING_SQL}) AS starting`,
    [running, id, served.map((s) => s.name), served.map((s) => s.version)],
  );
  return { found: row.found, starting: new Set(row.starting) };
}

/**
 * recordHeartbeatReadingStarting for a worker whose tasks the caller does not hold (an API server
 * beating for a remote worker): the tasks and versions are its row's, as it registered them.
 */
export async function recordHeartbeatOfRow(db: Db, id: string, running: number): Promise<{ found: boolean; starting: Set<string> }> {
  const [row] = await queryRows<{ found: boolean; starting: string[] }>(
    db,
    `WITH beat AS (UPDATE stepwise.workers SET last_seen_at = now(), running = ? WHERE worker_id = ? RETURNING tasks, task_versions)
     SELECT EXISTS (SELECT 1 FROM beat) AS found, ARRAY(
       SELECT t.name FROM stepwise.tasks t
         JOIN (SELECT u.name, coalesce(b.task_versions->>u.name, '') AS version FROM beat b, unnest(b.tasks) AS u(name)) u ON u.name = t.name
        WHERE coalesce(t.current_version, '') = u.version
           OR NOT ${servedByLiveWorker('t.name', "coalesce(t.current_version, '')")}) AS starting`,
    [running, id],
  );
  return { found: row.found, starting: new Set(row.starting) };
}

/** One version of a task: the live workers serving it and the unfinished executions pinned to it. */
export interface VersionCount {
  task: string;
  /** As stored: '' for the task defined without a version. */
  version: string;
  /** The version new executions start on: the last registered. */
  current: boolean;
  workers: number;
  pending: number;
  running: number;
  waiting: number;
}

/**
 * Every version of every task that a live worker serves or an unfinished execution is pinned to,
 * per task newest first (by its newest worker's start; versions nobody serves last). Reads the
 * active rows only (through the status indexes, as countActiveExecutions does) and the workers.
 * A version with executions and no worker is what nobody will run until someone deploys it or an
 * operator moves them (upgradeExecution).
 */
export async function countVersions(db: Db): Promise<VersionCount[]> {
  const rows = await queryRows<VersionCount & { newest?: Date | null }>(
    db,
    `WITH pinned AS (
       SELECT task, task_version AS version,
              count(*) FILTER (WHERE status = 'pending')::int AS pending,
              count(*) FILTER (WHERE status = 'running')::int AS running,
              count(*) FILTER (WHERE status = 'waiting')::int AS waiting
         FROM (SELECT task, task_version, status FROM stepwise.executions WHERE status IN ('pending','waiting') AND task_version IS NOT NULL
               UNION ALL
               SELECT task, task_version, status FROM stepwise.executions WHERE status = 'running' AND task_version IS NOT NULL) a
        GROUP BY 1, 2
     ),
     served AS (
       SELECT task, coalesce(w.task_versions->>task, '') AS version, count(*)::int AS workers, max(w.started_at) AS newest
         FROM stepwise.workers w, unnest(w.tasks) AS task
        WHERE ${LIVE_WORKER}
        GROUP BY 1, 2
     )
     SELECT v.*, coalesce(t.current_version, '') = v.version AS current
       FROM (SELECT coalesce(p.task, s.task) AS task, coalesce(p.version, s.version) AS version, coalesce(s.workers, 0) AS workers,
                    coalesce(p.pending, 0) AS pending, coalesce(p.running, 0) AS running, coalesce(p.waiting, 0) AS waiting, s.newest
               FROM pinned p FULL JOIN served s ON s.task = p.task AND s.version = p.version) v
       LEFT JOIN stepwise.tasks t ON t.name = v.task
      ORDER BY v.task, v.newest DESC NULLS LAST, v.version DESC`,
  );
  return rows.map(({ newest: _newest, ...v }) => v);
}
