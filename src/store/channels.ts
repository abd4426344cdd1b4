/** LISTEN/NOTIFY channels. Notifications are latency hints only: every listener also polls. */

/**
 * Work became due (payload: the task name), or will be: `task@ms`, an execution scheduled to start
 * `ms` milliseconds after the statement (a delayed start), so workers wake for it on time instead of
 * at a poll. Workers listen.
 */
export const CHANNEL_WORK = 'stepwise_work';

/** A NOTIFY of work on `task` from a statement that writes `due` (a row's due_at): now, or later with the delay. */
export const notifyWorkSql = (task: string, due: string, now = 'statement_timestamp()') =>
  `pg_notify('${CHANNEL_WORK}', CASE WHEN ${due} <= ${now} THEN ${task} ELSE ${task} || '@' || ceil(extract(epoch FROM ${due} - ${now}) * 1000)::bigint END)`;
/**
 * An execution changed status (payload: comma-separated ids, at most 200). Every statement that moves
 * a status notifies, once per statement. API servers listen: long-polls, streams, the changes stream.
 */
export const CHANNEL_CHANGED = 'stepwise_changed';
/**
 * Executions moved on within their status (payload: comma-separated ids, at most 200): steps
 * completed, a sleep ended, a long step named. Sent by workers apart from those writes, at most every
 * 25 ms (see progressAnnouncement), and only while some API server holds a stream (CHANNEL_STREAMS).
 * API servers' streams listen.
 */
export const CHANNEL_PROGRESS = 'stepwise_progress';
/**
 * Who follows progress. Payload STREAMS_HELD: an API server holds execution streams, sent when one
 * opens, every STREAMS_ANNOUNCE_MS while any is open, and in answer to STREAMS_ASK, which a worker sends
 * whenever its LISTEN connection (re)connects. Workers announce progress only for PROGRESS_WINDOW_MS
 * after the last STREAMS_HELD: every NOTIFY wakes every listening session of the database, so progress
 * nobody follows would cost each API server and worker a wake-up 40 times a second per worker
 * (docs/benchmarks.md, "Many processes").
 */
export const CHANNEL_STREAMS = 'stepwise_streams';
export const STREAMS_HELD = 'held';
export const STREAMS_ASK = 'ask';
/** How often an API server holding streams says so (CHANNEL_STREAMS). */
export const STREAMS_ANNOUNCE_MS = 5000;
/** How long a worker announces progress after hearing of streams: three announcements, so one lost costs nothing. */
export const PROGRESS_WINDOW_MS = 3 * STREAMS_ANNOUNCE_MS;
/** An execution was cancelled (payload: its id). Workers listen, to abort a running handler. */
export const CHANNEL_CANCEL = 'stepwise_cancel';
/** A task's registration (its schemas) changed (payload: its name). API servers listen, to drop cached validators. */
export const CHANNEL_TASKS = 'stepwise_tasks';
/** Webhook deliveries were queued (no payload). Worker processes' deliverers listen. */
export const CHANNEL_WEBHOOKS = 'stepwise_webhooks';

/**
 * A SELECT that sends `channel` the ids of `rows` (a CTE with an `id` column), 200 to a notification
 * (a payload must stay under PostgreSQL's 8,000 bytes): one notification for a statement's rows, where
 * pg_notify per row would send one each. No rows, no notification. A CTE holding it runs only when the
 * statement reads it, hence the `(SELECT count(*) FROM notified)` columns beside it.
 */
export function notifyIds(channel: string, rows: string): string {
  return `SELECT pg_notify('${channel}', string_agg(id::text, ',')) FROM (SELECT id, (row_number() OVER ()) / 200 AS chunk FROM ${rows}) c GROUP BY chunk`;
}
