import { CHANNEL_CHANGED, notifyIds } from '../channels';
import { opaqueParam as P, preparedRows, type Db } from '../db';
import type { Lease } from '../leases';
import { toJsonb } from '../rows';
import { COMPLETE, startsFrom, writes } from './moves';

/** One finished execution to record. */
export interface Completion extends Lease {
  output: unknown;
  /** The execution's parent, when a handler started it (ctx.invoke, ctx.spawn). */
  parentId?: string | null;
}

/**
 * Records several completions in one statement and one commit (group commit), with one NOTIFY for the
 * long-polls. Fenced: a completion lands only while its lease is held and the execution still runs,
 * so a result that arrives after a cancel or a takeover is discarded. Returns the ids that landed.
 */
export async function completeExecutions(db: Db, items: readonly Completion[]): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const rows = await preparedRows<{ id: string }>(
    db,
    'stepwise_complete',
    `WITH ${COMPLETE_JOINED_CTES}
     SELECT id, (SELECT count(*) FROM notified) AS _n FROM done`,
    completionParams(items),
  );
  return new Set(rows.map((r) => r.id));
}

/**
 * The CTEs `parents`, `own`, `done` and `notified` of a completion, over parameters $1..$4 (see
 * completionParams). `parents` locks the parents of the executions being completed ($4, ordered by
 * id), then `own` the executions themselves in id order, both before `done` updates any (their
 * InitPlans run before the update's scan). Each child's trigger (migration 007) then finds its parent
 * already held, so two batches finishing children of the same parents cannot lock those in opposite
 * orders and deadlock; parent before child is the order of every statement that finishes a child
 * (failExecution, cancelExecution too). Id order is that of every statement writing many of a
 * worker's executions (lease renewals, step records), so none of them deadlocks with a completion.
 * `parents` is empty for executions without a parent, which is nearly all of them: an index probe of
 * an empty array. One NOTIFY per 200 ids, since a payload must stay under PostgreSQL's 8,000 bytes. No
 * join: the rows are found by primary key (id = ANY), and each row's item by its lease token, which is
 * unique to one claim of one execution, so the item holding a row's current token is that row's (and
 * a stale item of the same execution, with an older token, matches nothing). Joined with an unnest of
 * the items, the generic plan re-scanned the unnest once per row: 96 x 96 comparisons, 4 of a 9 ms
 * statement.
 */
const completeCtes = (joined: boolean, parentIds = `id = ANY(${P('$4', 'uuid[]')})`, returning = 'e.id') => `parents AS (
       SELECT id FROM stepwise.executions WHERE ${parentIds} ORDER BY id FOR NO KEY UPDATE
     ),
     own AS (
       SELECT id FROM stepwise.executions WHERE id = ANY(${P('$1', 'uuid[]')}) AND (SELECT count(*) FROM parents) >= 0 ORDER BY id FOR NO KEY UPDATE
     ),
     done AS (
       UPDATE stepwise.executions e
          SET status = ${writes(COMPLETE, 'completed')}, output = ${joined ? 'i.output' : '($3::json[])[array_position($2::uuid[], e.lease_token)]'}, completed_at = now(),
              due_at = NULL, lease_token = NULL, current_step = NULL, error = NULL
         ${
           joined
             ? `FROM unnest(${P('$1', 'uuid[]')}, ${P('$2', 'uuid[]')}, ${P('$3', 'json[]')}) AS i(id, token, output)
        WHERE e.id = i.id AND e.lease_token = i.token AND ${startsFrom(COMPLETE, 'e.status')}`
             : `WHERE e.id = ANY(${P('$1', 'uuid[]')}) AND e.lease_token = ANY(${P('$2', 'uuid[]')}) AND ${startsFrom(COMPLETE, 'e.status')}
          AND ($1::uuid[])[array_position($2::uuid[], e.lease_token)] = e.id`
         }
          AND (SELECT count(*) FROM own) >= 0
        RETURNING ${returning}
     ),
     notified AS (
       ${notifyIds(CHANNEL_CHANGED, 'done')}
     )`;

export const COMPLETE_CTES = completeCtes(false);

/**
 * COMPLETE_CTES with `done` joined to the items: each item finds its row by primary key and completes
 * it only under the token it holds. The planner drives the join from the items (an array parameter,
 * taken for a few rows) into the primary key: one index probe per item, where the array_position form
 * compares each row with every item, which batches of hundreds feel. A worker's plain completions use
 * it; a throttled claim keeps COMPLETE_CTES, whose timing its keyed claims were tuned with.
 */
export const COMPLETE_JOINED_CTES = completeCtes(true);

/**
 * COMPLETE_JOINED_CTES for completions whose parents the caller does not know (the worker protocol's:
 * a remote worker names only the execution and its lease): the parents are read from the rows
 * themselves (a parent_id never changes), then locked first all the same. Parameters $1-$3 only.
 */
const COMPLETE_FINDING_PARENTS_CTES = completeCtes(
  true,
  `id IN (SELECT parent_id FROM stepwise.executions WHERE id = ANY(${P('$1', 'uuid[]')}) AND parent_id IS NOT NULL)`,
  'e.id, i.token',
);

/**
 * completeExecutions for completions without their parents' ids (see COMPLETE_FINDING_PARENTS_CTES).
 * Returns `id:token` of those that landed: a batch of several workers may hold a stale completion of
 * an execution beside the current one.
 */
export async function completeExecutionsFindingParents(db: Db, items: readonly Completion[]): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const rows = await preparedRows<{ id: string; token: string }>(
    db,
    'stepwise_complete_finding_parents',
    `WITH ${COMPLETE_FINDING_PARENTS_CTES}
     SELECT id, token, (SELECT count(*) FROM notified) AS _n FROM done`,
    completionParams(items).slice(0, 3),
  );
  return new Set(rows.map((r) => `${r.id}:${r.token}`));
}

export const completionParams = (items: readonly Completion[]) => [
  items.map((i) => i.id),
  items.map((i) => i.token),
  items.map((i) => toJsonb(i.output ?? null)),
  [...new Set(items.flatMap((i) => (i.parentId ? [i.parentId] : [])))].sort(),
];
