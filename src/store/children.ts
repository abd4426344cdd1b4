import { CHILD_KEY_PREFIX } from '../domain/keys';
import { flowKeySql } from './tasks';
import { notifyWorkSql } from './channels';
import { preparedRows, withReadCommitted, type Db } from './db';
import type { Lease } from './leases';
import { toJsonb } from './rows';

/** Idempotency keys of child executions start with this; clients may not use it. */

/** The key of the child started at position `seq` of `parentId`: the same on every replay. */
export const childKey = (parentId: string, seq: number): string => `${CHILD_KEY_PREFIX}${parentId}:${seq}`;

/** A child execution to start, from position `seq` (named `name`) of the parent holding `lease`. */
export interface NewChild {
  id: string;
  seq: number;
  name: string;
  task: string;
  data: unknown;
  startAt?: Date;
  /** ctx.spawn: the parent does not wait, so its step is finished as soon as the child exists. */
  detached: boolean;
  /** ctx.invoke's timeout: the wait ends this long after the child is started, finished or not. */
  timeoutMs?: number;
  /** The child's priority; undefined for its parent's. */
  priority?: number;
  /** The span of the parent's step that starts it, as a W3C traceparent: the child's attempts are its children. */
  traceparent?: string;
}

/** What a child step stores: the child's id, and once it has finished, its outcome. */
export interface ChildStepResult {
  execution_id: string;
  status?: 'completed' | 'failed' | 'cancelled';
  output?: unknown;
  error?: { type: string; message: string; retryable: boolean } | null;
  /** ctx.invoke's timeout passed first (the child itself goes on). */
  timed_out?: boolean;
}

/**
 * Inserts a child execution and the parent's `child` step that records it, in one statement fenced by
 * the parent's lease, so the step exists before the child can run (the trigger of migration 007
 * completes it when the child finishes). The parent's row is locked, not share-locked (a spawn counts
 * its step on that row, and two share-holders upgrading at once deadlock): starts of one parent's
 * children take turns, and a cancel of the parent waits for this statement, then cancels the child too. Idempotent through the child's key: a replay
 * after a crash, or a retry after a cut connection, finds the child and the step it made the first
 * time. Returns the child's id, or undefined when the parent's lease is lost.
 */
export async function startChild(db: Db, lease: Lease, child: NewChild): Promise<string | undefined> {
  const key = childKey(lease.id, child.seq);
  const rows = await preparedRows<{ id: string | null; fenced: boolean }>(
    db,
    'stepwise_start_child_v2',
    `WITH parent AS (
       SELECT id, priority FROM stepwise.executions WHERE id = $1 AND lease_token = $2 AND status = 'running' FOR NO KEY UPDATE
     ),
     inserted AS (
       INSERT INTO stepwise.executions (id, task, status, data, idempotency_key, parent_id, start_at, due_at, priority, concurrency_key, rate_key, traceparent)
       SELECT $3, $4, 'pending', $5::jsonb, $6, parent.id, $7::timestamptz, greatest(now(), coalesce($7::timestamptz, now())), coalesce($12::int, parent.priority),
              ${flowKeySql('$5::jsonb', 'tk.concurrency_key_path')}, ${flowKeySql('$5::jsonb', 'tk.rate_key_path')}, $13::text
         FROM parent LEFT JOIN stepwise.tasks tk ON tk.name = $4
       ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING id, task, due_at
     ),
     child AS (
       SELECT id FROM inserted
       UNION ALL
       SELECT id FROM stepwise.executions WHERE idempotency_key = $6 AND parent_id = $1 AND NOT EXISTS (SELECT 1 FROM inserted)
     ),
     step AS (
       INSERT INTO stepwise.steps (execution_id, seq, name, kind, completed, result, completed_at, wake_at)
       SELECT parent.id, $8, $9, 'child', $10, json_build_object('execution_id', child.id), CASE WHEN $10 THEN now() END,
              now() + make_interval(secs => $11::float8)
         FROM parent, child
       ON CONFLICT (execution_id, seq) DO NOTHING
       RETURNING seq
     ),
     counted AS (
       UPDATE stepwise.executions SET steps_completed = steps_completed + 1
        WHERE $10 AND id = (SELECT id FROM parent) AND EXISTS (SELECT 1 FROM step)
       RETURNING id
     )
     SELECT (SELECT id FROM child) AS id, EXISTS (SELECT 1 FROM parent) AS fenced,
            (SELECT count(*) FROM counted) AS _c,
            (SELECT bool_and(${notifyWorkSql('task', 'due_at', 'now()')} IS NULL) FROM inserted) AS _n`,
    [lease.id, lease.token, child.id, child.task, toJsonb(child.data ?? null), key, child.startAt?.toISOString() ?? null, child.seq, child.name, child.detached, child.timeoutMs === undefined ? null : child.timeoutMs / 1000, child.priority ?? null, child.traceparent ?? null],
  );
  const row = rows[0];
  if (!row?.fenced) return undefined;
  // Only a concurrent insert of the same key (this execution run twice at once) leaves no child here.
  if (row.id === null) throw new Error(`child execution ${key} was being started by another attempt; try again`);
  return row.id;
}
