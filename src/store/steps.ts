import { opaqueParam as P, preparedRows, queryRows, withReadCommitted, type Db } from './db';
import type { Lease } from './leases';
import { rowToStep, toJsonb, type ExecutionError, type StepFailure, type StepKind, type StepOutcome, type StepRecord, type StepRow } from './rows';

/** The durable history of an execution, in call order. */
export async function loadSteps(db: Db, executionId: string): Promise<StepRecord[]> {
  const rows = await queryRows<StepRow & { result_missing: boolean }>(
    db,
    'SELECT *, result IS NULL AS result_missing FROM stepwise.steps WHERE execution_id = ? ORDER BY seq',
    [executionId],
  );
  // SQL NULL is a step that returned undefined; JSON null is one that returned null.
  return rows.map((r) => ({ ...rowToStep(r), result: r.result_missing ? undefined : r.result }));
}

/** A page of an execution's history; `more` when steps follow its last. */
export interface StepPage {
  steps: StepRecord[];
  more: boolean;
}

/** A step's size on the wire: the JSON text of its result, error and failures (the rest is small and bounded). */
const STEP_BYTES = `octet_length(coalesce(result::text, '')) + octet_length(coalesce(error::text, '')) + octet_length(coalesce(failures::text, ''))`;

/**
 * Up to `limit` steps after `afterSeq` (-1: from the first), ending early once the JSON text of their
 * results, errors and failures passes `maxBytes` (the step that passes it included, so a page is never
 * empty while steps follow). A recursive walk of the (execution_id, seq) key, one step at a time: the
 * steps after the page are never read, and a deep page costs what the first does. Sizes are measured
 * in the database, which never sends more than the page.
 */
export async function loadStepPage(db: Db, executionId: string, afterSeq: number, limit: number, maxBytes: number): Promise<StepPage> {
  const rows = await queryRows<StepRow & { result_missing: boolean; more: boolean }>(
    db,
    `WITH RECURSIVE page(seq, bytes, n) AS (
       (SELECT seq, ${STEP_BYTES}, 1 FROM stepwise.steps WHERE execution_id = ?::uuid AND seq > ? ORDER BY seq LIMIT 1)
       UNION ALL
       SELECT s.seq, p.bytes + s.bytes, p.n + 1
         FROM page p CROSS JOIN LATERAL (
           SELECT seq, ${STEP_BYTES} AS bytes FROM stepwise.steps WHERE execution_id = ?::uuid AND seq > p.seq ORDER BY seq LIMIT 1
         ) s
        WHERE p.n < ? AND p.bytes < ?
     )
     SELECT st.*, st.result IS NULL AS result_missing,
            EXISTS (SELECT 1 FROM stepwise.steps m WHERE m.execution_id = ?::uuid AND m.seq > (SELECT max(seq) FROM page)) AS more
       FROM page JOIN stepwise.steps st ON st.execution_id = ?::uuid AND st.seq = page.seq
      ORDER BY st.seq`,
    [executionId, afterSeq, executionId, limit, maxBytes, executionId, executionId],
  );
  // SQL NULL is a step that returned undefined; jsonb null is one that returned null.
  const steps = rows.map((r) => ({ ...rowToStep(r), result: r.result_missing ? undefined : r.result }));
  return { steps, more: rows.length > 0 && rows[rows.length - 1].more };
}

/** What a replay needs of one recorded operation; the rest of the row stays in the database. */
export type ReplayRecord = Pick<StepRecord, 'seq' | 'name' | 'kind' | 'completed' | 'result' | 'wakeAt' | 'startedAt' | 'outcome' | 'error' | 'failures'> & {
  /** Failed attempts a step's retry budget no longer counts (an operator retried the execution). */
  attemptBase: number;
  /** When it ended (completed, failed or closed), in epoch microseconds: the order a replay settles in. */
  endedAt: number | null;
};

/**
 * The history a replay walks, in one prepared statement that reads only what a replay uses: a
 * finished operation's result, and for open ones their deadline and failures. Instants come as epoch
 * milliseconds (parsing a number is far cheaper than a timestamp), and a completed step's row carries
 * no more than its name and result, so a long history costs little more than its results' JSON.
 */
export async function loadReplayHistory(db: Db, executionId: string): Promise<ReplayRecord[]> {
  return readReplayRows(db, 'stepwise_replay_history', 'execution_id = $1', [executionId]);
}

/** The rows a resume in this process needs: those at `seqs` (what it waits for) and any from `fromSeq` on. */
export async function loadReplayRecords(db: Db, executionId: string, seqs: readonly number[], fromSeq: number): Promise<ReplayRecord[]> {
  return readReplayRows(db, 'stepwise_replay_records', 'execution_id = $1 AND (seq = ANY($2::int[]) OR seq >= $3)', [executionId, seqs, fromSeq]);
}

/** A row of the replay reads (see readReplayRows). */
interface ReplayRow {
  execution_id?: string;
  seq: number;
  name: string;
  kind: StepKind;
  completed: boolean;
  result: unknown;
  result_missing: boolean;
  wake_ms: number | null;
  started_ms: number;
  ended_us: number | null;
  outcome: StepOutcome | null;
  error: ExecutionError | null;
  failures: StepFailure[] | null;
  attempt_base: number;
}

/**
 * The histories of several executions just claimed, in one statement (the API server claims for many
 * remote workers at once): by execution id, each in position order. Executions without rows are absent.
 */
export async function loadReplayHistories(db: Db, executionIds: readonly string[]): Promise<Map<string, ReplayRecord[]>> {
  const histories = new Map<string, ReplayRecord[]>();
  if (executionIds.length === 0) return histories;
  const rows = await readReplayRows(db, 'stepwise_replay_histories', 'execution_id = ANY($1::uuid[])', [executionIds], 'execution_id, ');
  for (const { executionId, ...record } of rows as Array<ReplayRecord & { executionId: string }>) {
    const list = histories.get(executionId);
    if (list) list.push(record);
    else histories.set(executionId, [record]);
  }
  return histories;
}

async function readReplayRows(db: Db, name: string, where: string, values: unknown[], extra = ''): Promise<ReplayRecord[]> {
  const rows = await preparedRows<ReplayRow>(
    db,
    name,
    `SELECT ${extra}seq, name, kind, completed, result, result IS NULL AS result_missing,
            (extract(epoch FROM wake_at) * 1000)::float8 AS wake_ms, (extract(epoch FROM started_at) * 1000)::float8 AS started_ms,
            (extract(epoch FROM completed_at) * 1000000)::float8 AS ended_us,
            outcome, CASE WHEN NOT completed THEN error END AS error, CASE WHEN NOT completed THEN failures END AS failures, attempt_base
       FROM stepwise.steps WHERE ${where} ORDER BY ${extra}seq`,
    values,
  );
  // Only loadReplayHistories asks for the execution id: the worker's own reads allocate nothing more.
  if (extra !== '') return rows.map((r) => ({ executionId: r.execution_id as string, ...toReplayRecord(r) }));
  return rows.map(toReplayRecord);
}

function toReplayRecord(r: ReplayRow): ReplayRecord {
  return {
    seq: r.seq,
    name: r.name,
    kind: r.kind,
    completed: r.completed,
    // SQL NULL is a step that returned undefined; JSON null is one that returned null.
    result: r.result_missing ? undefined : r.result,
    wakeAt: r.wake_ms === null ? null : new Date(r.wake_ms),
    startedAt: new Date(r.started_ms),
    outcome: r.outcome,
    error: r.error,
    failures: r.failures ?? [],
    attemptBase: r.attempt_base,
    endedAt: r.ended_us,
  };
}

/** A completed step to record, under the lease of the worker that ran it. */
export interface StepResult extends Lease {
  seq: number;
  name: string;
  /** A completed step ('step', the default) or a patch marker ('patch', see ctx.patched). */
  kind?: 'step' | 'patch';
  result: unknown;
  /** When the step's function started (its row is written only when it finishes). */
  startedAt: Date;
  /**
   * Sent again after an error that may have come after its commit (a connection cut), or recorded
   * after failed attempts of the step: its row may already be there.
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
    items.map((i) => i.kind ?? 'step'),
  ]);
  return new Set(rows.map((r) => stepKey(r.execution_id, r.seq)));
}

/**
 * recordStepResults' statement: `counts` gives each lease's new steps (c.n), `conflict` the insert's
 * ON CONFLICT. `locked` takes the executions' rows in id order before the update does (see renewLeases).
 * No NOTIFY here: the worker announces progress apart (see progressAnnouncement).
 */
function recordStepsSql(counts: string, conflict: string): string {
  return `WITH input AS (
       SELECT * FROM unnest(${P('$1', 'uuid[]')}, ${P('$2', 'uuid[]')}, ${P('$3', 'int[]')}, ${P('$4', 'text[]')}, ${P('$5', 'json[]')}, ${P('$6', 'timestamptz[]')}, ${P('$7', 'text[]')}) WITH ORDINALITY AS i(id, token, seq, name, result, started_at, kind, ord)
     ),
     locked AS (
       SELECT id FROM stepwise.executions WHERE id = ANY(${P('$1', 'uuid[]')}) ORDER BY id FOR NO KEY UPDATE
     ),
     fence AS (
       UPDATE stepwise.executions e
          SET steps_completed = e.steps_completed + c.n, current_step = CASE WHEN c.n > 0 THEN NULL ELSE e.current_step END,
              attempts_since_progress = CASE WHEN c.n > 0 THEN 0 ELSE e.attempts_since_progress END
         FROM (${counts}) c
        WHERE e.id = c.id AND e.lease_token = c.token AND e.status = 'running'
          AND (SELECT count(*) FROM locked) >= 0
        RETURNING e.id, e.lease_token
     )
     INSERT INTO stepwise.steps AS st (execution_id, seq, name, kind, completed, result, started_at, completed_at)
     SELECT i.id, i.seq, i.name, i.kind, true, i.result, least(i.started_at, now()), now() + i.ord * interval '1 microsecond'
       FROM input i JOIN fence f ON f.id = i.id AND f.lease_token = i.token
     ${conflict}
     RETURNING execution_id, seq`;
}

// Patch markers are recorded like steps but are no step: steps_completed does not count them.
const RECORD_STEPS = ['stepwise_record_steps_v2', recordStepsSql(`SELECT id, token, count(*) FILTER (WHERE kind = 'step')::int AS n FROM input GROUP BY id, token`, '')] as const;

/**
 * Counts only steps not yet completed, reports a row this attempt already wrote as landed, and
 * completes the row that a step's failed attempts left (its failures stay).
 */
const RECORD_STEPS_AGAIN = [
  'stepwise_record_steps_again_v2',
  recordStepsSql(
    `SELECT i.id, i.token, count(*) FILTER (WHERE i.kind = 'step' AND (s.seq IS NULL OR NOT s.completed))::int AS n
       FROM input i LEFT JOIN stepwise.steps s ON s.execution_id = i.id AND s.seq = i.seq
      GROUP BY i.id, i.token`,
    `ON CONFLICT (execution_id, seq) DO UPDATE
        SET completed = true, result = CASE WHEN st.completed THEN st.result ELSE EXCLUDED.result END,
            completed_at = coalesce(st.completed_at, EXCLUDED.completed_at), wake_at = NULL
      WHERE st.kind = EXCLUDED.kind AND st.outcome IS NULL AND st.name = EXCLUDED.name`,
  ),
] as const;

/** Records one completed step (see recordStepResults). */
export async function recordStepResult(db: Db, lease: Lease, seq: number, name: string, result: unknown, startedAt = new Date()): Promise<boolean> {
  const landed = await recordStepResults(db, [{ ...lease, seq, name, result, startedAt }]);
  return landed.has(stepKey(lease.id, seq));
}

/** A failed attempt of a step to record: the last one when `final`, else one to retry (after `retryAt`, when durable). */
export interface StepFailureRecord {
  seq: number;
  name: string;
  attempt: number;
  error: ExecutionError;
  startedAt: Date;
  final: boolean;
  /** A retry far enough off to free the worker slot: the step row's deadline, as a sleep's. */
  retryAt?: Date;
}

/**
 * Records a failed attempt of a step, fenced by the lease: appends it to the step's failures (its row
 * is made on the first failure) and, for the last one, marks the step failed with its error. A retry
 * far off sets the row's `wake_at`, which the suspension then waits for. Returns false when the lease
 * was lost.
 */
export async function recordStepFailure(db: Db, lease: Lease, f: StepFailureRecord): Promise<boolean> {
  const failure = { attempt: f.attempt, error: f.error, started_at: f.startedAt.toISOString() };
  const rows = await queryRows<{ seq: number }>(
    db,
    `WITH fence AS (
       SELECT id FROM stepwise.executions WHERE id = ? AND lease_token = ? AND status = 'running' FOR NO KEY UPDATE
     )
     INSERT INTO stepwise.steps AS st (execution_id, seq, name, kind, completed, failures, outcome, error, wake_at, started_at, completed_at)
     SELECT fence.id, ?, ?, 'step', false, jsonb_build_array(?::jsonb || jsonb_build_object('ended_at', now())),
            CASE WHEN ? THEN 'failed' END, CASE WHEN ? THEN ?::jsonb END, ?::timestamptz, least(?::timestamptz, now()), CASE WHEN ? THEN now() END
       FROM fence
     ON CONFLICT (execution_id, seq) DO UPDATE
        -- Sent again after a cut connection, an attempt already kept is not appended twice.
        SET failures = CASE WHEN coalesce(st.failures, '[]'::jsonb) @> jsonb_build_array(jsonb_build_object('attempt', EXCLUDED.failures->0->'attempt'))
                            THEN st.failures ELSE coalesce(st.failures, '[]'::jsonb) || EXCLUDED.failures END,
            outcome = EXCLUDED.outcome,
            error = EXCLUDED.error, wake_at = EXCLUDED.wake_at, completed_at = EXCLUDED.completed_at
      WHERE st.kind = 'step' AND NOT st.completed AND st.outcome IS NULL AND st.name = EXCLUDED.name
     RETURNING seq`,
    [lease.id, lease.token, f.seq, f.name, JSON.stringify(failure), f.final, f.final, JSON.stringify(f.error), f.retryAt ?? null, f.startedAt, f.final],
  );
  return rows.length > 0;
}

/**
 * True when the execution still runs under `lease` and its step at `seq` keeps the failed attempt
 * `attempt`: a failure sent again (after a lost answer) that recordStepFailure no longer takes,
 * since the step is closed, was recorded the first time.
 */
export async function hasStepFailure(db: Db, lease: Lease, seq: number, attempt: number): Promise<boolean> {
  const rows = await queryRows<{ seq: number }>(
    db,
    `SELECT s.seq FROM stepwise.executions e JOIN stepwise.steps s ON s.execution_id = e.id AND s.seq = ?
      WHERE e.id = ? AND e.lease_token = ? AND e.status = 'running' AND s.failures @> jsonb_build_array(jsonb_build_object('attempt', ?::int))`,
    [seq, lease.id, lease.token, attempt],
  );
  return rows.length > 0;
}

/** What completing a timed operation found: done by this call, finished by another way first, or the lease lost. */
export type TimedCompletion = { kind: 'completed' | 'finished'; result: unknown } | { kind: 'not_due' } | { kind: 'lost' };

/**
 * Completes a sleep whose time has come, or a wait (an event's, a child's) whose deadline has passed,
 * and counts it; the deadline is checked in the statement, on the database's clock, so a delivery that
 * came first wins and one that comes later loses. `result` is merged into what the step holds (a
 * child step keeps its child's id; the merge goes through jsonb, harmless as an open step holds no
 * value of the handler's). A step found finished (a child that finished before its deadline) is
 * returned as it is. Lock first, then read, in READ COMMITTED: a child's trigger that finished the
 * step while this waited for the lock is then seen.
 */
export async function completeTimedStep(db: Db, lease: Lease, seq: number, result: Record<string, unknown>): Promise<TimedCompletion> {
  return withReadCommitted(db, async (connection): Promise<TimedCompletion> => {
    const fence = await connection.query(`SELECT 1 FROM stepwise.executions WHERE id = $1 AND lease_token = $2 AND status = 'running' FOR NO KEY UPDATE`, [lease.id, lease.token]);
    if (fence.rowCount === 0) return { kind: 'lost' };
    const { rows } = await connection.query<{ completed: boolean; result: unknown; done: boolean }>(
      `WITH done AS (
         UPDATE stepwise.steps s SET completed = true, result = (coalesce(s.result::jsonb, '{}'::jsonb) || $3::jsonb)::json, completed_at = now()
          WHERE s.execution_id = $1 AND s.seq = $2 AND NOT s.completed AND s.outcome IS NULL AND s.wake_at <= now()
         RETURNING s.result
       ),
       counted AS (
         UPDATE stepwise.executions SET steps_completed = steps_completed + 1, current_step = NULL
          WHERE id = $1 AND EXISTS (SELECT 1 FROM done)
         RETURNING id
       )
       SELECT true AS completed, result, true AS done, (SELECT count(*) FROM counted) AS _c FROM done
       UNION ALL
       SELECT completed, result, false, 0 FROM stepwise.steps WHERE execution_id = $1 AND seq = $2 AND NOT EXISTS (SELECT 1 FROM done)`,
      [lease.id, seq, JSON.stringify(result)],
    );
    const row = rows[0];
    if (!row) throw new Error(`the history of execution ${lease.id} has no operation at #${seq + 1}`);
    if (row.done) return { kind: 'completed', result: row.result };
    return row.completed ? { kind: 'finished', result: row.result } : { kind: 'not_due' };
  });
}
