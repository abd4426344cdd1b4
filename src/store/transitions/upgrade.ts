import { CHANNEL_CHANGED, CHANNEL_WORK, notifyIds } from '../channels';
import { queryRows, type Db } from '../db';
import type { ExecutionStatus } from '../../domain/status';
import { servedByLiveWorker } from '../workers';

/**
 * The statuses an execution may move to another version in: pending and waiting ones, which no
 * handler holds, and running ones whose lease expired (their worker is gone; the version's next
 * worker would take them over). A live lease is refused.
 */
export const UPGRADABLE: readonly ExecutionStatus[] = ['pending', 'waiting', 'running'];

export type UpgradeOutcome =
  | { kind: 'upgraded'; id: string; status: ExecutionStatus; previous: string | null }
  | { kind: 'not_upgradable'; id: string; status: ExecutionStatus; held: boolean }
  | { kind: 'not_served'; task: string }
  | { kind: 'not_found' };

/**
 * Pins a pending or waiting execution, or a running one whose lease expired, to `version` (as stored:
 * '' for the task without one), so that only workers serving it claim it from now on; the operator
 * vouches that its code replays the history. One statement: it locks the row, checks its status and
 * lease and that a live worker serves the version (else nothing would run it), updates, and wakes
 * the workers (the execution may be due). A claim that took the row first holds a live lease: refused.
 */
export async function upgradeExecution(db: Db, id: string, version: string): Promise<UpgradeOutcome> {
  const [row] = await queryRows<{ id: string; task: string; status: ExecutionStatus; previous: string | null; held: boolean; moved: boolean }>(
    db,
    `WITH target AS (
       SELECT id, task, status, task_version, status = 'running' AND due_at > now() AS held FROM stepwise.executions WHERE id = ? FOR NO KEY UPDATE
     ),
     served AS (
       SELECT ${servedByLiveWorker('t.task', '?::text')} AS ok FROM target t
     ),
     moved AS (
       UPDATE stepwise.executions e SET task_version = ?::text
         FROM target t, served s
        WHERE e.id = t.id AND t.status IN (${UPGRADABLE.map((s) => `'${s}'`).join(', ')}) AND NOT t.held AND s.ok
       RETURNING e.id, e.task
     ),
     woken AS (SELECT pg_notify('${CHANNEL_WORK}', task) FROM moved),
     notified AS (${notifyIds(CHANNEL_CHANGED, 'moved')})
     SELECT t.id, t.task, t.status, t.task_version AS previous, t.held, EXISTS (SELECT 1 FROM moved) AS moved,
            (SELECT count(*) FROM woken) AS _w, (SELECT count(*) FROM notified) AS _n
       FROM target t, served s`,
    [id, version, version],
  );
  if (!row) return { kind: 'not_found' };
  if (!UPGRADABLE.includes(row.status) || row.held) return { kind: 'not_upgradable', id: row.id, status: row.status, held: row.held };
  if (!row.moved) return { kind: 'not_served', task: row.task };
  return { kind: 'upgraded', id: row.id, status: row.status, previous: row.previous };
}

/** Whether a live worker serves `version` of `task` (as stored). */
export async function isVersionServed(db: Db, task: string, version: string): Promise<boolean> {
  const [row] = await queryRows<{ ok: boolean }>(
    db,
    `SELECT ${servedByLiveWorker('t.name', '?::text')} AS ok FROM (SELECT ?::text AS name) t`,
    [version, task],
  );
  return row.ok;
}
