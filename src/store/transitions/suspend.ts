import { CHANNEL_CHANGED } from '../channels';
import { queryRows, withReadCommitted, type Db } from '../db';
import type { Lease } from '../leases';
import type { StepKind } from '../rows';
import { SUSPEND, startsFrom, writes } from './moves';

/**
 * One durable operation a suspended execution waits for. A sleep or an event wait seen for the first
 * time is recorded here with its deadline; one recorded before keeps its stored deadline, as do a
 * child step (recorded when the child was started) and a step waiting out its retry backoff.
 */
export interface Wait {
  seq: number;
  /** The operation's name in the history (numbered when repeated). */
  name: string;
  kind: Extract<StepKind, 'sleep' | 'event' | 'child' | 'step'>;
  /** For an event wait: the event's name, as clients send it. */
  eventName?: string;
  /** Its deadline when recorded now: a sleep's end, an event wait's timeout; null for none. */
  wakeAt: Date | null;
}

const CLOSED_ERROR = `jsonb_build_object('type', 'WaitSupersededError', 'message', 'closed: the handler no longer waits here', 'retryable', false)`;

/**
 * Closes the open waits of execution `id` at positions `seqs` (a wait the handler left open when it
 * ended): cancelled, with the time they closed, so that no delivery or wake-up reaches them and a
 * replay settles them in that order.
 */
const CLOSE_WAITS = (id: string, seqs: string) => `UPDATE stepwise.steps s
            SET outcome = 'cancelled', completed_at = now(), error = ${CLOSED_ERROR}
          WHERE s.execution_id = ${id} AND s.seq = ANY(${seqs}::int[]) AND NOT s.completed AND s.outcome IS NULL
         RETURNING 1`;

/**
 * Closes the waits a handler left open when it ended (a race's losing branch), fenced by the lease:
 * the history then shows them cancelled, not in progress. Only sent when there are some.
 */
export async function closeOpenWaits(db: Db, lease: Lease, seqs: readonly number[]): Promise<boolean> {
  const rows = await queryRows<{ ok: boolean }>(
    db,
    `WITH fence AS (
       SELECT id FROM stepwise.executions WHERE id = ? AND lease_token = ? AND status = 'running' FOR NO KEY UPDATE
     ),
     closed AS (
       ${CLOSE_WAITS('(SELECT id FROM fence)', '?')}
     )
     SELECT EXISTS (SELECT 1 FROM fence) AS ok, (SELECT count(*) FROM closed) AS _c`,
    // An array literal: knex would spread a JavaScript array into a list of parameters.
    [lease.id, lease.token, `{${seqs.join(',')}}`],
  );
  return rows[0].ok;
}

/**
 * Suspends the execution on every wait its handler is blocked on, in one fenced transaction: records
 * the new sleeps and event waits (a replay's keep their first deadline: ON CONFLICT leaves the row),
 * and turns the execution waiting with its lease released, due at the earliest deadline among them
 * (or `deadline`, the task's timeout, if sooner), or at once when one of them has already finished: a
 * child that finished while the handler ran. Event waits that later ones superseded (`superseded`,
 * see Suspension.block) are recorded closed. API servers hear of the new status (CHANNEL_CHANGED).
 * Returns when it is due, or undefined when the lease was lost. `dueInMs` is how long after the
 * database answered it comes due: a worker adds it to its own clock on arrival, so its wake-up is
 * never early, whatever the skew between the clocks.
 *
 * Two statements in one READ COMMITTED transaction: the first locks the execution's row (fenced by
 * the lease), the second reads the waits with a snapshot taken after that lock. A finishing child's
 * trigger takes the same lock first, so either it ran before (the second statement sees the step
 * finished: due at once) or it runs after the suspension has committed (and wakes the execution).
 */
export async function suspendExecution(db: Db, lease: Lease, waits: readonly Wait[], deadline: Date | null, currentStep: string, superseded: readonly Wait[] = []): Promise<{ wakeAt: Date | null; dueInMs: number | null } | undefined> {
  return withReadCommitted(db, async (connection) => {
    const fence = await connection.query(`SELECT 1 FROM stepwise.executions WHERE id = $1 AND lease_token = $2 AND ${startsFrom(SUSPEND)} FOR UPDATE`, [lease.id, lease.token]);
    if (fence.rowCount === 0) return undefined;
    const fresh = waits.filter((w) => w.kind === 'sleep' || w.kind === 'event');
    const { rows } = await connection.query<{ due_at: Date | null; due_in_ms: number | null }>(
      `WITH fresh AS (
         INSERT INTO stepwise.steps AS st (execution_id, seq, name, kind, event_name, wake_at)
         SELECT $1, w.seq, w.name, w.kind, w.event_name, w.wake_at
           FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::timestamptz[]) AS w(seq, name, kind, event_name, wake_at)
         ON CONFLICT (execution_id, seq) DO NOTHING
         RETURNING seq, wake_at, false AS done
       ),
       superseded AS (
         INSERT INTO stepwise.steps AS st (execution_id, seq, name, kind, event_name, outcome, completed_at, error)
         SELECT $1, w.seq, w.name, 'event', w.event_name, 'cancelled', now(), ${CLOSED_ERROR}
           FROM unnest($10::int[], $11::text[], $12::text[]) AS w(seq, name, event_name)
         ON CONFLICT (execution_id, seq) DO UPDATE SET outcome = 'cancelled', completed_at = now(), error = EXCLUDED.error
          WHERE NOT st.completed AND st.outcome IS NULL
         RETURNING 1
       ),
       waits AS (
         SELECT seq, wake_at, completed OR outcome IS NOT NULL AS done FROM stepwise.steps WHERE execution_id = $1 AND seq = ANY($7::int[])
         UNION ALL
         SELECT seq, wake_at, done FROM fresh
       ),
       ex AS (
         UPDATE stepwise.executions
            SET status = ${writes(SUSPEND, 'waiting')}, lease_token = NULL, current_step = $8,
                due_at = CASE WHEN EXISTS (SELECT 1 FROM waits WHERE done) THEN now() ELSE least((SELECT min(wake_at) FROM waits), $9::timestamptz) END,
                wait_event_name = NULL, wait_since = NULL, wait_timeout_at = NULL
          WHERE id = $1
         RETURNING due_at
       )
       SELECT due_at, (extract(epoch FROM due_at - clock_timestamp()) * 1000)::float8 AS due_in_ms, pg_notify('${CHANNEL_CHANGED}', $1::text) IS NULL AS _n,
              (SELECT count(*) FROM superseded) AS _s
         FROM ex`,
      [
        lease.id,
        fresh.map((w) => w.seq),
        fresh.map((w) => w.name),
        fresh.map((w) => w.kind),
        fresh.map((w) => w.eventName ?? null),
        fresh.map((w) => w.wakeAt),
        waits.map((w) => w.seq),
        currentStep,
        deadline,
        superseded.map((w) => w.seq),
        superseded.map((w) => w.name),
        superseded.map((w) => w.eventName ?? null),
      ],
    );
    return { wakeAt: rows[0].due_at, dueInMs: rows[0].due_in_ms };
  });
}
