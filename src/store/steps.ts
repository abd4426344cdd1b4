import { queryRows, type Db } from './db';
import type { Lease } from './leases';
import { rowToStep, toJsonb, type StepKind, type StepRecord, type StepRow } from './rows';

/** The durable history of an execution, in call order. */
export async function loadSteps(db: Db, executionId: string): Promise<StepRecord[]> {
  const rows = await queryRows<StepRow & { result_missing: boolean }>(
    db,
    'SELECT *, result IS NULL AS result_missing FROM stepwise.steps WHERE execution_id = ? ORDER BY seq',
    [executionId],
  );
  // SQL NULL is a step that returned undefined; jsonb null is one that returned null.
  return rows.map((r) => ({ ...rowToStep(r), result: r.result_missing ? undefined : r.result }));
}

/**
 * Records a completed step and counts it, in one statement: the step row is inserted only if the
 * execution update matched this lease, so a worker that lost its lease writes nothing.
 */
export async function recordStepResult(db: Db, lease: Lease, seq: number, name: string, result: unknown): Promise<boolean> {
  const rows = await queryRows<{ seq: number }>(
    db,
    `WITH fence AS (
       UPDATE stepwise.executions SET steps_completed = steps_completed + 1, current_step = NULL
        WHERE id = ? AND lease_token = ? AND status = 'running'
        RETURNING id
     )
     INSERT INTO stepwise.steps (execution_id, seq, name, kind, completed, result, completed_at)
     SELECT id, ?, ?, 'step', true, ?::jsonb, now() FROM fence
     RETURNING seq`,
    [lease.id, lease.token, seq, name, toJsonb(result)],
  );
  return rows.length > 0;
}

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
       SELECT id FROM stepwise.executions WHERE id = ? AND lease_token = ? AND status = 'running' FOR UPDATE
     ),
     step AS (
       INSERT INTO stepwise.steps AS st (execution_id, seq, name, kind, wake_at)
       SELECT id, ?, ?, ?, ${wakeExpr} FROM fence
       ON CONFLICT (execution_id, seq) DO UPDATE SET name = st.name
       RETURNING wake_at, started_at
     ),
     ex AS (
       UPDATE stepwise.executions e
          SET status = 'waiting', lease_token = NULL, current_step = ?, due_at = step.wake_at,
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

/** Completes a sleep whose time has come, or a wait whose timeout passed, and counts it. Fenced. */
export async function completeTimedStep(db: Db, lease: Lease, seq: number, result: unknown): Promise<boolean> {
  const rows = await queryRows<{ seq: number }>(
    db,
    `WITH fence AS (
       UPDATE stepwise.executions SET steps_completed = steps_completed + 1, current_step = NULL
        WHERE id = ? AND lease_token = ? AND status = 'running'
        RETURNING id
     )
     UPDATE stepwise.steps s SET completed = true, result = ?::jsonb, completed_at = now()
       FROM fence WHERE s.execution_id = fence.id AND s.seq = ? AND NOT s.completed
     RETURNING s.seq`,
    [lease.id, lease.token, toJsonb(result ?? null), seq],
  );
  return rows.length > 0;
}
