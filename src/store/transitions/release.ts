import { CHANNEL_CHANGED, CHANNEL_WORK, notifyIds } from '../channels';
import { queryRows, type Db } from '../db';
import type { Lease } from '../leases';
import type { ClaimedExecution } from './claim';
import { RELEASE, RETURN_UNSTARTED, startsFrom, writes } from './moves';

/**
 * Hands executions back (worker shutdown): they turn pending and due now, so any worker picks them up
 * at once; a NOTIFY wakes one, another tells API servers of the new status. The attempt is kept with
 * the outcome `released`.
 */
export async function releaseExecutions(db: Db, leases: readonly Lease[]): Promise<Set<string>> {
  if (leases.length === 0) return new Set();
  const rows = await queryRows<{ id: string }>(
    db,
    `WITH released AS (
       UPDATE stepwise.executions e
          SET status = ${writes(RELEASE, 'pending')}, due_at = now(), lease_token = NULL, current_step = NULL
         FROM unnest(?::uuid[], ?::uuid[]) AS l(id, token)
        WHERE e.id = l.id AND e.lease_token = l.token AND ${startsFrom(RELEASE, 'e.status')}
        RETURNING e.id, e.task, e.attempt, e.worker_id, e.attempt_started_at
     ),
     kept AS (
       INSERT INTO stepwise.attempts (execution_id, attempt, worker_id, started_at, ended_at, outcome)
       SELECT id, attempt, worker_id, attempt_started_at, now(), 'released' FROM released WHERE attempt > 0
       ON CONFLICT (execution_id, attempt) DO NOTHING
     ),
     notified AS (
       ${notifyIds(CHANNEL_CHANGED, 'released')}
     )
     SELECT id, pg_notify('${CHANNEL_WORK}', task) IS NULL AS _n, (SELECT count(*) FROM notified) AS _c FROM released`,
    [leases.map((l) => l.id), leases.map((l) => l.token)],
  );
  return new Set(rows.map((r) => r.id));
}

/** A claimed execution whose handler never started, with its status before the claim. */
export interface Unstarted extends Lease {
  previousStatus: ClaimedExecution['previousStatus'];
}

/**
 * Undoes claims whose handlers never started (a worker's prefetch buffer): each execution returns to
 * the status it had, due now, with the attempt the claim counted taken back, so handing work to
 * another worker costs it no retry; one that had never started is unpinned from the claimer's version
 * again (see ClaimTask). A NOTIFY wakes one, another tells API servers of the status. Fenced
 * like every worker write.
 */
export async function returnUnstarted(db: Db, items: readonly Unstarted[]): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const rows = await queryRows<{ id: string }>(
    db,
    `WITH returned AS (
       UPDATE stepwise.executions e
          SET status = CASE WHEN l.previous = 'waiting' THEN ${writes(RETURN_UNSTARTED, 'waiting')} ELSE ${writes(RETURN_UNSTARTED, 'pending')} END,
              attempt = e.attempt - CASE WHEN l.previous = 'waiting' THEN 0 ELSE 1 END,
              attempts_since_progress = greatest(0, e.attempts_since_progress - CASE WHEN l.previous = 'waiting' THEN 0 ELSE 1 END),
              started_at = CASE WHEN l.previous = 'pending' AND e.attempt = 1 THEN NULL ELSE e.started_at END,
              -- Never started, so no history: any version may start it, as before the claim pinned it.
              task_version = CASE WHEN l.previous = 'pending' AND e.attempt = 1 THEN NULL ELSE e.task_version END,
              due_at = now(), lease_token = NULL, current_step = NULL
         FROM unnest(?::uuid[], ?::uuid[], ?::text[]) AS l(id, token, previous)
        WHERE e.id = l.id AND e.lease_token = l.token AND ${startsFrom(RETURN_UNSTARTED, 'e.status')}
        RETURNING e.id, e.task
     ),
     notified AS (
       ${notifyIds(CHANNEL_CHANGED, 'returned')}
     )
     SELECT id, pg_notify('${CHANNEL_WORK}', task) IS NULL AS _n, (SELECT count(*) FROM notified) AS _c FROM returned`,
    [items.map((i) => i.id), items.map((i) => i.token), items.map((i) => i.previousStatus)],
  );
  return new Set(rows.map((r) => r.id));
}
