import { createHash } from 'node:crypto';
import pg from 'pg';
import type { FlowPolicy } from '../../domain/flow';
import { isBehindTransactionPooler, simpleRowsBeforeCommit, type Db } from '../db';
import { CLAIM_COLUMNS, claimWrites, PIN_KEY, pinnedVersionSql, startsNew, toClaimed, UNPINNED, type ClaimedExecution, type ClaimRow, type ClaimTask } from './claim';
import type { Completion } from './complete';
import { throttledClaimQuery, type ThrottledStatement } from './throttled-query';

export type { ThrottledStatement } from './throttled-query';

/** What a claim of a throttled task did. */
export interface ThrottledClaim {
  claimed: ClaimedExecution[];
  /** The key this claim ended on: the next claim starts after it, so keys take turns ('' at first). */
  cursor: string;
  /** Due executions were left although the worker had room: which limit held them, or null. */
  heldBy: 'concurrency' | 'rate' | null;
  /** The claim took a key's whole share of the room, below the key's own room: it may have more, claim again at once. */
  more: boolean;
  /** Another worker held the task's lock: it was claiming the task, and this claim took nothing. */
  contended: boolean;
  /**
   * Settles when the claim's commit is answered: the rows come back before (see
   * simpleRowsBeforeCommit), so a worker may start their handlers while the commit is flushed.
   */
  committed: Promise<void>;
  /** The completions given that landed (durable once `committed` settles). */
  completed: Set<string>;
}

type ThrottledRow = Partial<ClaimRow> & { next_cursor: string | null; held_by_rate: number; due_left: boolean; share_full: boolean; locked: boolean };


const statementsByPolicy = new Map<string, ThrottledStatement>();

/**
 * Claims due executions of one task with a concurrency limit or a rate limit, keeping both exactly
 * over all workers. `want` is the worker's room, `runnable` the part of it it can start at once (its
 * free handler slots); beyond that, a keyed claim takes a key's executions only while at least half
 * of its room stays for other workers (see throttledStatement). A transaction of its own takes a
 * transaction-level advisory lock on the task, so claims of the task run one at a time; the claim
 * statement runs after the lock (READ COMMITTED, so its snapshot includes every claim that committed
 * before) and counts what runs and what started. The claimed rows come back before the commit is
 * answered (`committed`), as the batched claim's do. `completions` are recorded in the same
 * transaction, before the claim, which then sees the places they freed: one commit for both.
 * The lock is only tried: when another worker holds it, that worker is claiming the task right now,
 * and this one claims nothing rather than wait (a stalled holder cannot stall its loop).
 *
 * An execution counts against a concurrency limit from its claim until it finishes, sleeps, waits for
 * an event or is released (a live lease); a start counts against a rate limit for `period` from the
 * instant its claim read the clock, taken after the lock so that starts are stamped in lock order.
 */
export async function claimThrottledExecutions(
  db: Db,
  served: ClaimTask,
  policy: FlowPolicy,
  want: number,
  leaseMs: number,
  workerId: string | null,
  cursor: string,
  runnable = want,
  completions: readonly Completion[] = [],
): Promise<ThrottledClaim> {
  const task = typeof served === 'string' ? served : served.name;
  const none: ThrottledClaim = { claimed: [], cursor, heldBy: null, more: false, contended: false, committed: Promise.resolve(), completed: new Set() };
  if (want <= 0 && completions.length === 0) return none;
  const statement = throttledStatement(served, policy);
  const args = [String(want), String(leaseMs / 1000), workerId === null ? 'NULL' : pg.escapeLiteral(workerId), ...(statement.keyed ? [pg.escapeLiteral(cursor), String(Math.min(runnable, want))] : [])];
  // One round trip: BEGIN, the lock (its outcome kept in a transaction-local setting the claim
  // reads), the claim in a statement of its own, whose snapshot is taken after the lock, and COMMIT.
  const query = throttledClaimQuery(isBehindTransactionPooler(db), task, statement, args, completions);
  const sent = Date.now();
  const { rows: results, finished } = await simpleRowsBeforeCommit(db, query.build, query.onFailure);
  const rows = results[results.length - 1] as ThrottledRow[];
  const completed = new Set(completions.length > 0 ? (results[0] as Array<{ id: string }>).map((r) => r.id) : []);
  const claimed = rows.filter((r) => r.id !== null && r.id !== undefined).map((r) => toClaimed(sent)(r as ClaimRow));
  const summary = rows[0];
  if (!summary) return { ...none, committed: finished, completed };
  // Held back: fewer than the worker could start at once (prefetch room left empty is no throttling).
  const heldBy = claimed.length < Math.min(runnable, want) && summary.due_left ? (summary.held_by_rate > 0 ? 'rate' : 'concurrency') : null;
  return { claimed, cursor: summary.next_cursor ?? cursor, heldBy, more: summary.share_full && claimed.length < want, contended: !summary.locked, committed: finished, completed };
}

/**
 * The claim statement of one task under one policy ($1 the room, $2 lease seconds, $3 worker id, $4
 * the cursor, $5 the room to run at once), with the task and the limits written into the text and
 * prepared once per connection. It claims nothing unless the transaction's `stepwise.claim_locked`
 * setting is 'true' (exported for scripts/bench/flow-explain.ts).
 *
 * - Groups: with a keyed limit, the keys that have due executions, found by skipping through the
 *   key's index one key at a time (a loose index scan: one probe per key, however long a key's
 *   backlog), starting after the cursor and wrapping around (every key sorts after '', the first
 *   cursor), then the keys that have only expired leases to take over. Keys at their concurrency
 *   limit are skipped; the first few with room are kept (keysPerClaim). The recursion runs only as
 *   far as the LIMIT pulls it. Without a key, one group: the task.
 * - Candidates: each group's due executions in priority then due order, at most its room and its
 *   share of $1 (split evenly between the groups), locked with SKIP LOCKED. A key that gave its whole
 *   share, less than its room, may have more: the worker claims again at once.
 * - Picked: the candidates in turns (every group's first, then every group's second, ...), without
 *   more starts per rate key than the window has left (a resume after a sleep or an event is no
 *   start), and, for an unkeyed concurrency limit, no more than the task has room for. Past the
 *   worker's free slots ($5), a key gives only its first (room - 1) / 2: a buffer never holds the
 *   places that other workers with free slots need (a small limit gives none ahead at all).
 */
export function throttledStatement(served: ClaimTask, policy: FlowPolicy): ThrottledStatement {
  const task = typeof served === 'string' ? served : served.name;
  const V = pinnedVersionSql([served], 'task');
  const key = JSON.stringify([task, V, startsNew(served), policy.concurrency, policy.rateLimit]);
  let statement = statementsByPolicy.get(key);
  if (statement) return statement;
  const T = pg.escapeLiteral(task);
  const conc = policy.concurrency;
  const rate = policy.rateLimit;
  // The column executions are grouped by: the concurrency key, else the rate key, else none.
  const group = conc?.key ? 'concurrency_key' : rate?.key ? 'rate_key' : null;
  const fresh = `task = ${T} AND status IN ('pending','waiting') AND due_at <= now()`;
  // Rows this worker may claim: never started, or pinned to its version (see ClaimTask). The unkeyed
  // claim reads them as two ranges of the claim's index; the keys' indexes filter them.
  const unpinned = startsNew(served) ? `${PIN_KEY} = ${UNPINNED}` : 'FALSE';
  const pinned = `${PIN_KEY} = ${V}`;
  const mine = `(${unpinned} OR ${pinned})`;
  // Nothing is read or locked unless this transaction holds the task's lock (see claimThrottledExecutions).
  const gate = `current_setting('stepwise.claim_locked', true) = 'true'`;
  const expired = `task = ${T} AND status = 'running' AND due_at <= now() AND ${mine}`;
  const columns = 'id, status, due_at, priority, attempt, worker_id, attempt_started_at, rate_key';
  const running = (where: string) => `(SELECT count(*) FROM stepwise.executions WHERE task = ${T} AND status = 'running' AND due_at > now()${where})::int`;
  const candidates = (where: string, limit: string) => `SELECT * FROM (
             SELECT ${columns} FROM stepwise.executions WHERE ${fresh} AND ${unpinned}${where}
              ORDER BY priority DESC, due_at LIMIT ${limit} FOR UPDATE SKIP LOCKED) f
           UNION ALL
           SELECT * FROM (
             SELECT ${columns} FROM stepwise.executions WHERE ${fresh} AND ${pinned}${where}
              ORDER BY priority DESC, due_at LIMIT ${limit} FOR UPDATE SKIP LOCKED) v
           UNION ALL
           SELECT * FROM (
             SELECT ${columns} FROM stepwise.executions WHERE ${expired}${where}
              ORDER BY due_at LIMIT ${limit} FOR UPDATE SKIP LOCKED) x`;
  let groups: string;
  if (group) {
    const next = (after: string, upTo: string) => `SELECT ${group} FROM stepwise.executions
            WHERE ${fresh} AND ${mine} AND ${group} IS NOT NULL AND ${after}${upTo} ORDER BY ${group} LIMIT 1`;
    const room = conc?.key ? `${conc.limit} - ${running(` AND concurrency_key = r.k`)}` : '$1::int';
    // Keys a claim visits: enough to fill the room twice over at the per-key limit, at least 16 (every
    // key, when fewer have work). Each key costs a probe, a count and a locked scan: a claim of 288 over
    // 100 keys of 32 need not visit them all, and the cursor brings the others' turn at the next claims.
    const keysPerClaim = conc?.key ? `least($1::int, greatest(16, ceil(2.0 * $1::int / ${conc.limit})::int))` : '$1';
    groups = `after_keys(k) AS (
       (${next(`${group} > $4::text`, '')})
       UNION ALL
       SELECT (${next(`${group} > a.k`, '')}) FROM after_keys a WHERE a.k IS NOT NULL
     ),
     before_keys(k) AS (
       (${next(`${group} <= $4::text`, '')})
       UNION ALL
       SELECT (${next(`${group} > b.k`, ` AND ${group} <= $4::text`)}) FROM before_keys b WHERE b.k IS NOT NULL
     ),
     ring AS (
       SELECT k FROM after_keys WHERE k IS NOT NULL
       UNION ALL
       SELECT k FROM before_keys WHERE k IS NOT NULL
       UNION ALL
       SELECT DISTINCT x.${group} FROM stepwise.executions x
        WHERE x.task = ${T} AND x.status = 'running' AND x.due_at <= now() AND x.${group} IS NOT NULL
          AND (x.task_version IS NULL OR x.task_version = ${V})
          AND NOT EXISTS (SELECT 1 FROM stepwise.executions y
                           WHERE y.task = ${T} AND y.status IN ('pending','waiting') AND y.due_at <= now() AND y.${group} = x.${group}
                             AND (y.task_version IS NULL OR y.task_version = ${V}))
     ),
     groups AS (
       SELECT g.k, g.room, row_number() OVER () AS pos, count(*) OVER () AS n FROM (
         SELECT r.k, m.room FROM ring r CROSS JOIN LATERAL (SELECT ${room} AS room OFFSET 0) m WHERE ${gate} AND m.room > 0 LIMIT ${keysPerClaim}
       ) g
     ),
     cand AS (
       SELECT c.*, g.k, g.pos, g.room, least(g.room, ceil($1::float8 / g.n)::int) AS share,
              row_number() OVER (PARTITION BY g.k ORDER BY c.priority DESC, c.due_at) AS rank
         FROM groups g CROSS JOIN LATERAL (
           ${candidates(` AND ${group} = g.k`, 'least(g.room, ceil($1::float8 / g.n)::int)')}
         ) c
     ),`;
  } else {
    groups = `cand AS (
       SELECT c.*, ''::text AS k, 1::bigint AS pos, $1::int AS room, $1::int AS share, row_number() OVER (ORDER BY c.priority DESC, c.due_at) AS rank
         FROM (${candidates('', '$1::int')}) c
        WHERE ${gate}
     ),`;
  }
  // Rooms: the task's, for an unkeyed concurrency limit; each rate key's, for a rate limit.
  const taskRoom = conc && !conc.key ? `greatest(0, least($1::int, ${conc.limit} - ${running('')}))` : '$1::int';
  const period = rate ? `make_interval(secs => ${rate.periodMs / 1000})` : '';
  const rateRooms = rate
    ? `rates AS MATERIALIZED (
       SELECT rk, ${rate.limit} - (SELECT count(*) FROM stepwise.rate_starts s WHERE s.task = ${T} AND s.key = rk AND s.started_at > (SELECT t FROM clock) - ${period})::int AS room
         FROM (SELECT DISTINCT coalesce(rate_key, '') AS rk FROM cand) d
     ),`
    : '';
  const startRoom = rate ? '(SELECT room FROM rates WHERE rates.rk = coalesce(r.rate_key, \'\'))' : '$1::int';
  const rateWrites = rate
    ? `started AS (
       INSERT INTO stepwise.rate_starts (task, key, started_at)
       SELECT ${T}, coalesce(rate_key, ''), clock.t FROM picked, clock WHERE status <> 'waiting'
     ),
     forgotten AS (
       DELETE FROM stepwise.rate_starts WHERE ${gate} AND task = ${T} AND started_at <= (SELECT t FROM clock) - ${period}
     ),`
    : '';
  // The part of the room the worker can start at once; the rest is prefetch (keyed limits only).
  const runnable = group ? '$5::int' : '$1::int';
  const text = `WITH RECURSIVE
     clock AS MATERIALIZED (SELECT clock_timestamp() AS t),
     ${groups}
     ${rateRooms}
     ${
       rate
         ? `ranked AS (
       SELECT c.*, CASE WHEN c.status <> 'waiting' THEN row_number() OVER (PARTITION BY coalesce(c.rate_key, ''), c.status <> 'waiting' ORDER BY c.rank, c.pos) END AS start_rank
         FROM cand c WHERE c.rank <= c.share
     ),
     allowed AS (
       SELECT r.*, (r.status <> 'waiting' AND r.start_rank > ${startRoom}) AS over_rate FROM ranked r
     ),`
         : `allowed AS (
       SELECT c.*, false AS over_rate FROM cand c WHERE c.rank <= c.share
     ),`
     }
     ordered AS (
       SELECT a.*, row_number() OVER (ORDER BY a.rank, a.pos) AS ord FROM allowed a WHERE NOT a.over_rate
     ),
     picked AS MATERIALIZED (
       SELECT * FROM ordered
        WHERE (ord <= ${runnable} OR rank <= (room - 1) / 2)
          AND NOT EXISTS (SELECT 1 FROM stepwise.tasks p WHERE p.name = ${T} AND p.paused)
        ORDER BY ord LIMIT ${taskRoom}
     ),
     ${rateWrites}
     ${claimWrites('picked', '$2', '$3', V, rate ? '(SELECT t FROM clock)' : 'now()')},
     summary AS (
       SELECT (SELECT k FROM picked ORDER BY pos DESC LIMIT 1) AS next_cursor,
              (SELECT count(*) FROM allowed WHERE over_rate)::int AS held_by_rate,
              (SELECT count(*) FROM picked) < ${runnable} AND (EXISTS (
                SELECT 1 FROM stepwise.executions WHERE ${fresh} AND ${unpinned} AND id <> ALL(ARRAY(SELECT id FROM picked)) ORDER BY priority DESC, due_at LIMIT 1)
                OR EXISTS (
                SELECT 1 FROM stepwise.executions WHERE ${fresh} AND ${pinned} AND id <> ALL(ARRAY(SELECT id FROM picked)) ORDER BY priority DESC, due_at LIMIT 1)) AS due_left,
              EXISTS (SELECT 1 FROM cand WHERE rank = share AND share < room) AS share_full,
              ${gate} AS locked,
              (SELECT count(*) FROM claim_notified) AS _c
     )
     SELECT c.*, s.* FROM summary s LEFT JOIN (SELECT ${CLAIM_COLUMNS} FROM claimed JOIN picked due USING (id)) c ON true`;
  statement = { name: `stepwise_claim_throttled_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`, text, keyed: group !== null };
  statementsByPolicy.set(key, statement);
  return statement;
}
