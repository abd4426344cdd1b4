import type { Knex } from 'knex';
import pg from 'pg';
import { CHANNEL_PROGRESS, CHANNEL_STREAMS, STREAMS_ASK, STREAMS_HELD } from './channels';
import { queryRows } from './db';

/** Ids per notification: a payload must stay under PostgreSQL's 8,000 bytes. */
const IDS_PER_NOTIFICATION = 200;

/**
 * The statements that tell API servers' streams that these executions moved on within their status
 * (steps completed, a sleep ended, a long step named): a transaction of its own that does not wait for
 * its commit to be flushed, sent in one round trip (simple protocol). Not in the writes themselves: a
 * transaction that notifies holds a cluster-wide lock from its commit's start to its end, WAL flush
 * included (notifications queue in commit order), so writes that notify commit one at a time; step
 * records, the most frequent write, would lose their group commits (docs/benchmarks.md, live
 * streams). This transaction holds that lock for no flush, and nothing waits for it. A lost one costs
 * only latency: the API servers' fallback re-check finds what it missed.
 */
export function progressAnnouncement(ids: readonly string[]): string {
  const notifies: string[] = [];
  for (let i = 0; i < ids.length; i += IDS_PER_NOTIFICATION) {
    notifies.push(`SELECT pg_notify('${CHANNEL_PROGRESS}', ${pg.escapeLiteral(ids.slice(i, i + IDS_PER_NOTIFICATION).join(','))});`);
  }
  return `BEGIN; SET LOCAL synchronous_commit TO off; ${notifies.join(' ')} COMMIT;`;
}

/** Tells workers that this API server holds execution streams (CHANNEL_STREAMS): they announce progress for a while. */
export async function announceStreams(db: Knex): Promise<void> {
  await queryRows(db, `SELECT pg_notify('${CHANNEL_STREAMS}', '${STREAMS_HELD}')`);
}

/** A worker's question to API servers: does any hold streams? (CHANNEL_STREAMS; sent on its LISTEN connection.) */
export const askForStreams = `SELECT pg_notify('${CHANNEL_STREAMS}', '${STREAMS_ASK}')`;
