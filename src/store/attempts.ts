import { queryRows, type Db } from './db';
import type { ExecutionError } from './rows';

export type AttemptOutcome = 'completed' | 'failed' | 'retrying' | 'released' | 'lost' | 'cancelled';

/** One attempt of an execution: who ran it, when, and how it ended (null while it runs or waits). */
export interface AttemptRecord {
  attempt: number;
  workerId: string | null;
  startedAt: Date | null;
  endedAt: Date | null;
  outcome: AttemptOutcome | null;
  /** The error, for the operator: a stack may be in it (bounded), unlike the execution's own error. */
  error: (ExecutionError & { stack?: string }) | null;
}

interface AttemptRow {
  attempt: number;
  worker_id: string | null;
  started_at: Date | null;
  ended_at: Date | null;
  outcome: AttemptOutcome | null;
  error: (ExecutionError & { stack?: string }) | null;
}

/**
 * An execution's attempts, oldest first; undefined when it does not exist. Attempts that ended
 * without ending the execution, and final failures, are rows of their own (see migration 011); the
 * current or last attempt otherwise is read from the execution's row: in progress (no outcome) while
 * it is pending, running or waiting, else ended as the execution did.
 */
export async function listAttempts(db: Db, executionId: string): Promise<AttemptRecord[] | undefined> {
  const rows = await queryRows<AttemptRow & { exists: boolean }>(
    db,
    `WITH e AS (
       SELECT * FROM stepwise.executions WHERE id = ?
     ),
     kept AS (
       SELECT a.attempt, a.worker_id, a.started_at, a.ended_at, a.outcome, a.error FROM stepwise.attempts a, e WHERE a.execution_id = e.id
     ),
     current AS (
       SELECT e.attempt, e.worker_id, e.attempt_started_at AS started_at,
              CASE WHEN e.status IN ('completed', 'failed', 'cancelled') THEN e.completed_at END AS ended_at,
              CASE WHEN e.status IN ('completed', 'failed', 'cancelled') THEN e.status END AS outcome,
              CASE WHEN e.status IN ('failed', 'cancelled') THEN e.error END AS error
         FROM e WHERE e.attempt > 0 AND NOT EXISTS (SELECT 1 FROM kept WHERE kept.attempt = e.attempt)
     )
     SELECT *, true AS exists FROM kept
     UNION ALL SELECT *, true FROM current
     UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, EXISTS (SELECT 1 FROM e) WHERE NOT EXISTS (SELECT 1 FROM kept) AND NOT EXISTS (SELECT 1 FROM current)
     ORDER BY 1`,
    [executionId],
  );
  if (rows.length === 1 && rows[0].attempt === null) return rows[0].exists ? [] : undefined;
  return rows.map((r) => ({ attempt: r.attempt, workerId: r.worker_id, startedAt: r.started_at, endedAt: r.ended_at, outcome: r.outcome, error: r.error }));
}
