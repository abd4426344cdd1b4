import { withReadCommitted, queryRows, type Db } from '../db';
import type { ChildStepResult } from '../children';
import type { Lease } from '../leases';
import type { StepKind } from '../rows';
import { SUSPEND, startsFrom, writes } from './moves';

export interface Suspension {
  seq: number;
  /** The step's name in the history (numbered when repeated). */
  name: string;
  /** For an event wait: the event's name, as clients send it. */
  eventName?: string;
  kind: Extract<StepKind, 'sleep' | 'event'>;
  /** Sleep until, or event timeout at, this instant; null with no `delayMs`: an event without timeout. */
  wakeAt: Date | null;
  /** A delay measured on the database clock, used instead of `wakeAt` when given. */
  delayMs?: number;
}

/**
 * Starts (or, on replay, resumes) a durable pause in one fenced statement: records the sleep or wait
 * with its deadline the first time only (a replay keeps the stored deadline: ON CONFLICT returns the
 * existing row), and turns the execution waiting with its lease released. Returns the stored deadline,
 * or undefined when the lease was lost.
 */
export async function suspendExecution(db: Db, lease: Lease, s: Suspension): Promise<{ wakeAt: Date | null } | undefined> {
  const isEvent = s.kind === 'event';
  const wakeExpr = s.delayMs !== undefined ? 'now() + make_interval(secs => ?)' : '?::timestamptz';
  const rows = await queryRows<{ wake_at: Date | null }>(
    db,
    `WITH fence AS (
       SELECT id FROM stepwise.executions WHERE id = ? AND lease_token = ? AND ${startsFrom(SUSPEND)} FOR UPDATE
     ),
     step AS (
       INSERT INTO stepwise.steps AS st (execution_id, seq, name, kind, wake_at)
       SELECT id, ?, ?, ?, ${wakeExpr} FROM fence
       ON CONFLICT (execution_id, seq) DO UPDATE SET name = st.name
       RETURNING wake_at, started_at
     ),
     ex AS (
       UPDATE stepwise.executions e
          SET status = ${writes(SUSPEND, 'waiting')}, lease_token = NULL, current_step = ?, due_at = step.wake_at,
              wait_event_name = CASE WHEN ? THEN ? END,
              wait_since = CASE WHEN ? THEN step.started_at END,
              wait_timeout_at = CASE WHEN ? THEN step.wake_at END
         FROM fence, step WHERE e.id = fence.id
        RETURNING e.due_at
     )
     SELECT due_at AS wake_at FROM ex`,
    [
      lease.id,
      lease.token,
      s.seq,
      s.name,
      s.kind,
      s.delayMs !== undefined ? s.delayMs / 1000 : s.wakeAt,
      s.name,
      isEvent,
      s.eventName ?? s.name,
      isEvent,
      isEvent,
    ],
  );
  return rows[0] ? { wakeAt: rows[0].wake_at } : undefined;
}

export type ChildWait = { kind: 'suspended' } | { kind: 'finished'; result: ChildStepResult } | { kind: 'lost' };

/**
 * Suspends the parent until the child recorded at `seq` finishes (or the invoke's timeout, the step's
 * `wake_at`, passes: the parent is due then), unless it already has; a timeout that has passed
 * finishes the step as timed out, counted like any step. Two
 * statements in one READ COMMITTED transaction: the first locks the parent's row (fenced by its lease),
 * the second reads the child step with a snapshot taken after that lock. The trigger that completes
 * the step takes the same lock first, so either it ran before (and the step reads finished: no
 * suspension) or it runs after the suspension has committed (and wakes the parent).
 */
export async function suspendForChild(db: Db, lease: Lease, seq: number, name: string): Promise<ChildWait> {
  return withReadCommitted(db, async (connection): Promise<ChildWait> => {
    const fence = await connection.query(`SELECT 1 FROM stepwise.executions WHERE id = $1 AND lease_token = $2 AND ${startsFrom(SUSPEND)} FOR UPDATE`, [lease.id, lease.token]);
    if (fence.rowCount === 0) return { kind: 'lost' };
    const { rows } = await connection.query<{ result: ChildStepResult; suspended: boolean }>(
      `WITH step AS (
         SELECT completed, result, wake_at, coalesce(wake_at <= now(), false) AS expired
           FROM stepwise.steps WHERE execution_id = $1 AND seq = $2 AND kind = 'child'
       ),
       timed_out AS (
         UPDATE stepwise.steps s SET completed = true, completed_at = now(), result = s.result || '{"timed_out": true}'::jsonb
           FROM step WHERE s.execution_id = $1 AND s.seq = $2 AND NOT step.completed AND step.expired
         RETURNING s.result
       ),
       counted AS (
         UPDATE stepwise.executions SET steps_completed = steps_completed + 1, current_step = NULL
          WHERE id = $1 AND EXISTS (SELECT 1 FROM timed_out)
         RETURNING id
       ),
       waiting AS (
         UPDATE stepwise.executions
            SET status = ${writes(SUSPEND, 'waiting')}, lease_token = NULL, current_step = $3, due_at = (SELECT wake_at FROM step),
                wait_event_name = NULL, wait_since = NULL, wait_timeout_at = NULL
          WHERE id = $1 AND EXISTS (SELECT 1 FROM step WHERE NOT completed AND NOT expired)
         RETURNING id
       )
       SELECT coalesce((SELECT result FROM timed_out), step.result) AS result, EXISTS (SELECT 1 FROM waiting) AS suspended,
              (SELECT count(*) FROM counted) AS _c
         FROM step`,
      [lease.id, seq, name],
    );
    if (!rows[0]) throw new Error(`the history of execution ${lease.id} has no child step at #${seq + 1}`);
    return rows[0].suspended ? { kind: 'suspended' } : { kind: 'finished', result: rows[0].result };
  });
}
