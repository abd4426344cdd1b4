import { preparedRows, queryRows, type Db } from './db';
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

/** A completed step to record, under the lease of the worker that ran it. */
export interface StepResult extends Lease {
  seq: number;
  name: string;
  result: unknown;
  /** When the step's function started (its row is written only when it finishes). */
  startedAt: Date;
  /**
   * Sent again after an error that may have come after its commit (a connection cut): its row may
   * already be there, written by this very attempt.
   */
  resent?: boolean;
}

/** Key of a step result in the set `recordStepResults` returns. */
export const stepKey = (id: string, seq: number): string => `${id}:${seq}`;

/**
 * Records completed steps of any number of executions in one statement and one commit (the worker
 * group-commits concurrent steps; each caller still waits for the commit before its handler goes on).
 * Fenced: a step row is inserted only where the execution update matched its lease, so a worker that
 * lost its lease writes nothing. Returns the keys (stepKey) that landed.
 *
 * A batch with a resent step takes the idempotent form: a row this attempt already wrote (the lease is
 * still held, so no other attempt can have) is reported landed and counted once. Only then, as the
 * form costs an index probe and a speculative insert per row, which a step-heavy workload feels.
 */
export async function recordStepResults(db: Db, items: readonly StepResult[]): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const [name, text] = items.some((i) => i.resent) ? RECORD_STEPS_AGAIN : RECORD_STEPS;
  const rows = await preparedRows<{ execution_id: string; seq: number }>(db, name, text, [
    items.map((i) => i.id),
    items.map((i) => i.token),
    items.map((i) => i.seq),
    items.map((i) => i.name),
    items.map((i) => toJsonb(i.result)),
    items.map((i) => i.startedAt),
  ]);
  return new Set(rows.map((r) => stepKey(r.execution_id, r.seq)));
}

/** recordStepResults' statement: `counts` gives each lease's new steps (c.n), `conflict` the insert's ON CONFLICT. */
function recordStepsSql(counts: string, conflict: string): string {
  return `WITH input AS (
       SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::text[], $5::jsonb[], $6::timestamptz[]) AS i(id, token, seq, name, result, started_at)
     ),
     fence AS (
       UPDATE stepwise.executions e
          SET steps_completed = e.steps_completed + c.n, current_step = NULL
         FROM (${counts}) c
        WHERE e.id = c.id AND e.lease_token = c.token AND e.status = 'running'
        RETURNING e.id, e.lease_token
     )
     INSERT INTO stepwise.steps AS st (execution_id, seq, name, kind, completed, result, started_at, completed_at)
     SELECT i.id, i.seq, i.name, 'step', true, i.result, least(i.started_at, now()), now()
       FROM input i JOIN fence f ON f.id = i.id AND f.lease_token = i.token
     ${conflict}
     RETURNING execution_id, seq`;
}

const RECORD_STEPS = ['stepwise_record_steps', recordStepsSql('SELECT id, token, count(*)::int AS n FROM input GROUP BY id, token', '')] as const;

/** Counts only steps not yet recorded, and reports a row this attempt already wrote as landed. */
const RECORD_STEPS_AGAIN = [
  'stepwise_record_steps_again',
  recordStepsSql(
    `SELECT i.id, i.token, count(*) FILTER (WHERE s.seq IS NULL)::int AS n
       FROM input i LEFT JOIN stepwise.steps s ON s.execution_id = i.id AND s.seq = i.seq
      GROUP BY i.id, i.token`,
    `ON CONFLICT (execution_id, seq) DO UPDATE SET completed = st.completed WHERE st.kind = 'step' AND st.completed AND st.name = EXCLUDED.name`,
  ),
] as const;

/** Records one completed step (see recordStepResults). */
export async function recordStepResult(db: Db, lease: Lease, seq: number, name: string, result: unknown, startedAt = new Date()): Promise<boolean> {
  const landed = await recordStepResults(db, [{ ...lease, seq, name, result, startedAt }]);
  return landed.has(stepKey(lease.id, seq));
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
