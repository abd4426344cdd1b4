import { opaqueParam as P, preparedRows, queryRows, type Db } from './db';

/**
 * Lease upkeep: the writes a worker makes on an execution it holds that do not change its status.
 * Status changes (claims, completions, failures, releases, pauses, cancels) are in ./transitions.
 */

/** The fencing token of one claim: every write a worker makes carries it. */
export interface Lease {
  id: string;
  token: string;
}


/**
 * Extends the leases this worker still holds; returns the ids it still holds. A lease past its end is
 * not revived, even when no other worker took the execution over: a concurrency-limited claim no
 * longer counts it, and may have started another in its place. Its handler stops (the lease is lost)
 * and the execution is claimed again.
 *
 * Rows are locked in id order before the update (the gate's InitPlan runs first), as every statement
 * that writes many of one worker's executions does (recordStepResults, completions): a renewal and a
 * batch of step records of the same worker cannot deadlock on rows locked in opposite orders.
 */
export async function renewLeases(db: Db, leases: readonly Lease[], leaseMs: number): Promise<Set<string>> {
  if (leases.length === 0) return new Set();
  const rows = await preparedRows<{ id: string }>(
    db,
    'stepwise_renew',
    `WITH locked AS (
       SELECT id FROM stepwise.executions WHERE id = ANY(${P('$2', 'uuid[]')}) ORDER BY id FOR NO KEY UPDATE
     )
     UPDATE stepwise.executions e SET due_at = now() + make_interval(secs => $1)
       FROM unnest(${P('$2', 'uuid[]')}, ${P('$3', 'uuid[]')}) AS l(id, token)
      WHERE e.id = l.id AND e.lease_token = l.token AND e.status = 'running' AND e.due_at > now()
        AND (SELECT count(*) FROM locked) >= 0
      RETURNING e.id`,
    [leaseMs / 1000, leases.map((l) => l.id), leases.map((l) => l.token)],
  );
  return new Set(rows.map((r) => r.id));
}

/** Names the step in progress, so status readers see what a long step is doing. */
export async function setCurrentStep(db: Db, lease: Lease, name: string): Promise<boolean> {
  const rows = await queryRows<{ id: string }>(
    db,
    `UPDATE stepwise.executions SET current_step = ? WHERE id = ? AND lease_token = ? AND status = 'running' RETURNING id`,
    [name, lease.id, lease.token],
  );
  return rows.length > 0;
}
