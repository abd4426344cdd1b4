import { queryRows, type Db } from './db';

/**
 * The worker registry (table `workers`, migration 010): what each worker process says of itself, and
 * what readers make of its silence. One row per running worker, so every statement here reads or
 * writes a handful of rows.
 */

/** How a registered worker is reported: as it said (`active`, `stopping`), or `lost` once it fell silent. */
export const WORKER_PRESENCE = Object.freeze({ active: 'active', stopping: 'stopping', lost: 'lost' } as const);
export type WorkerPresence = (typeof WORKER_PRESENCE)[keyof typeof WORKER_PRESENCE];

/** What a worker records of itself when it starts. */
export interface WorkerRegistration {
  id: string;
  hostname: string;
  pid: number;
  version: string;
  tasks: readonly string[];
  /** The version of each task it serves ('' for a task defined without one, and for a task left out). */
  taskVersions?: Readonly<Record<string, string>>;
  concurrency: number;
  running: number;
  /** Silence after which readers report the worker lost: its heartbeat interval times the beats it may miss. */
  lostAfterMs: number;
  /** When it first registered (the database's time, from a previous registerWorker); now when omitted. */
  startedAt?: Date;
}

/** A registered worker as readers see it. */
export interface WorkerRecord {
  id: string;
  hostname: string;
  pid: number;
  version: string;
  tasks: string[];
  taskVersions: Record<string, string>;
  concurrency: number;
  running: number;
  startedAt: Date;
  lastSeenAt: Date;
  state: WorkerPresence;
}

interface WorkerRow {
  worker_id: string;
  hostname: string;
  pid: number;
  version: string;
  tasks: string[];
  task_versions: Record<string, string> | null;
  concurrency: number;
  running: number;
  started_at: Date;
  last_seen_at: Date;
  state: WorkerPresence;
}

function rowToWorker(row: WorkerRow): WorkerRecord {
  return {
    id: row.worker_id,
    hostname: row.hostname,
    pid: row.pid,
    version: row.version,
    tasks: row.tasks,
    taskVersions: row.task_versions ?? {},
    concurrency: row.concurrency,
    running: row.running,
    startedAt: row.started_at,
    lastSeenAt: row.last_seen_at,
    state: row.state,
  };
}

/**
 * True for a row whose worker has been silent for longer than it said it may be. Each row carries its
 * own threshold, so any reader judges every worker by that worker's heartbeat interval; the clock is
 * the database's, like every due time and lease.
 */
const IS_LOST = `last_seen_at < now() - make_interval(secs => lost_after_ms / 1000.0)`;

/** A worker row (alias `w`) that serves work: active and not lost. */
export const LIVE_WORKER = `w.state = 'active' AND NOT (w.${IS_LOST})`;

/**
 * SQL: a live worker serves version `version` of task `task` (both SQL expressions; a worker's task
 * without a version serves ''). What a claim of a pinned execution needs, so what upgrades, the
 * current version's drain and the visibility of unserved executions all ask.
 */
export const servedByLiveWorker = (task: string, version: string) =>
  `EXISTS (SELECT 1 FROM stepwise.workers w WHERE ${task} = ANY(w.tasks) AND coalesce(w.task_versions->>${task}, '') = ${version} AND ${LIVE_WORKER})`;

/**
 * Records a worker as active, seen now; returns when it started (the database's time). A worker whose
 * row was forgotten while it was cut off registers again with its first `startedAt`: the upsert keeps
 * whichever row exists, so a registration that races a heartbeat never duplicates the worker.
 */
export async function registerWorker(db: Db, w: WorkerRegistration): Promise<Date> {
  const [row] = await queryRows<{ started_at: Date }>(
    db,
    `INSERT INTO stepwise.workers (worker_id, hostname, pid, version, tasks, task_versions, concurrency, running, lost_after_ms, state, started_at, last_seen_at)
     VALUES (?, ?, ?, ?, ?::text[], ?::jsonb, ?, ?, ?, 'active', COALESCE(?::timestamptz, now()), now())
     ON CONFLICT (worker_id) DO UPDATE SET running = EXCLUDED.running, last_seen_at = now()
     RETURNING started_at`,
    [w.id, w.hostname, w.pid, w.version, [...w.tasks], JSON.stringify(w.taskVersions ?? {}), w.concurrency, w.running, Math.ceil(w.lostAfterMs), w.startedAt ?? null],
  );
  return row.started_at;
}

/** A heartbeat: the worker is alive and runs `running` handlers. False when its row is gone (forgotten). */
export async function recordHeartbeat(db: Db, id: string, running: number): Promise<boolean> {
  const rows = await queryRows(db, 'UPDATE stepwise.workers SET last_seen_at = now(), running = ? WHERE worker_id = ? RETURNING 1', [running, id]);
  return rows.length > 0;
}

/** The worker began shutting down: it claims no more and finishes (or hands back) what it holds. */
export async function markWorkerStopping(db: Db, id: string, running: number): Promise<void> {
  await queryRows(db, `UPDATE stepwise.workers SET state = 'stopping', last_seen_at = now(), running = ? WHERE worker_id = ?`, [running, id]);
}

/** The worker stopped: it holds nothing any more, so nothing is left to report. */
export async function deleteWorker(db: Db, id: string): Promise<void> {
  await queryRows(db, 'DELETE FROM stepwise.workers WHERE worker_id = ?', [id]);
}

/**
 * Forgets workers that have been lost for longer than `forgetAfterMs` (crashed or cut off long ago);
 * returns how many. Any worker runs it now and then. Two workers that run it together may meet on a
 * row's lock: the second waits for the first's commit and finds the row gone, which costs a few rows'
 * worth of waiting on a table this small.
 */
export async function deleteLostWorkers(db: Db, forgetAfterMs: number): Promise<number> {
  const rows = await queryRows(
    db,
    `DELETE FROM stepwise.workers
      WHERE last_seen_at < now() - make_interval(secs => lost_after_ms / 1000.0) - make_interval(secs => ?)
     RETURNING 1`,
    [forgetAfterMs / 1000],
  );
  return rows.length;
}

/** Every registered worker, oldest first, reported `lost` when it missed its beats. */
export async function listWorkers(db: Db): Promise<WorkerRecord[]> {
  const rows = await queryRows<WorkerRow>(
    db,
    `SELECT worker_id, hostname, pid, version, tasks, task_versions, concurrency, running, started_at, last_seen_at,
            CASE WHEN ${IS_LOST} THEN 'lost' ELSE state END AS state
       FROM stepwise.workers
      ORDER BY started_at, worker_id`,
  );
  return rows.map(rowToWorker);
}

/** Live workers (active and not lost) per task they serve; a task nobody serves is absent. */
export async function countLiveWorkersByTask(db: Db): Promise<Map<string, number>> {
  const rows = await queryRows<{ task: string; workers: number }>(
    db,
    `SELECT task, count(*)::int AS workers
       FROM stepwise.workers, unnest(tasks) AS task
      WHERE state = 'active' AND NOT (${IS_LOST})
      GROUP BY task`,
  );
  return new Map(rows.map((r) => [r.task, r.workers]));
}
