import { queryRows, type Db } from '../../src/store/db';
import { waitUntil } from '../helpers/wait-until';

/** What the server reports written: rows of the test database's tables, and where its WAL stands. */
export interface ServerFigures {
  /** Rows inserted, updated and deleted in the database's own tables. */
  rowsWritten: number;
  /** Of the updates, those that were HOT (no index entry written): informative, not budgeted. */
  hotUpdates: number;
  /** The WAL flushed so far, as an LSN: the start or end of the range walBytesOf reads. */
  walPosition: string;
}

/** The application_name of the connection that measures: every other one in the database is the product's. */
export const MEASURING_APP = 'stepwise-budget';

/** The server's major version (15, 18). */
export async function readServerMajor(db: Db): Promise<number> {
  const [row] = await queryRows<{ v: string }>(db, "SELECT current_setting('server_version_num') AS v");
  return Math.floor(Number(row.v) / 10000);
}

/**
 * Turns autovacuum off on every table of the database: a vacuum that starts during a workload or not,
 * depending on timing, writes WAL that the product did not ask for.
 */
export async function disableAutovacuum(db: Db): Promise<void> {
  const tables = await queryRows<{ name: string }>(
    db,
    "SELECT format('%I.%I', n.nspname, c.relname) AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND c.relkind = 'r'",
  );
  for (const t of tables) await queryRows(db, `ALTER TABLE ${t.name} SET (autovacuum_enabled = off, toast.autovacuum_enabled = off)`);
}

/**
 * The WAL written for this database between two positions, read back with pg_walinspect: records
 * that touch its relations, and every record of the transactions that did (their commits). Other
 * databases' writes (test files running beside this one, other users of the server) stay out.
 * `checkpoints`: checkpoints that began in the range (asked for by anyone on the server), after
 * which pages written again write full images: the bytes are then not comparable.
 */
export async function walBytesOf(db: Db, from: string, to: string): Promise<{ bytes: number; checkpoints: number }> {
  await queryRows(db, 'CREATE EXTENSION IF NOT EXISTS pg_walinspect');
  const [row] = await queryRows<{ bytes: number; checkpoints: number }>(
    db,
    `WITH r AS (SELECT xid::text AS xid, record_length, record_type,
                       block_ref ~ ('rel \\d+/' || (SELECT oid FROM pg_database WHERE datname = current_database()) || '/') AS touches
                  FROM pg_get_wal_records_info(?::pg_lsn, ?::pg_lsn)),
          ours AS (SELECT DISTINCT xid FROM r WHERE touches AND xid <> '0')
     SELECT coalesce(sum(record_length) FILTER (WHERE touches OR xid IN (SELECT xid FROM ours)), 0)::bigint AS bytes,
            count(*) FILTER (WHERE record_type = 'CHECKPOINT_ONLINE')::int AS checkpoints
       FROM r`,
    [from, to],
  );
  return { bytes: Number(row.bytes), checkpoints: row.checkpoints };
}

/**
 * Keeps the server's WAL from here on until the measuring session ends (a temporary physical slot),
 * so that a checkpoint during a workload, asked for by anyone on the server, cannot recycle the
 * segments walBytesOf reads back. `db` must be a pool of one connection.
 */
export async function holdWal(db: Db): Promise<void> {
  await queryRows(db, "SELECT pg_create_physical_replication_slot('stepwise_budget_' || pg_backend_pid(), true, true)");
}

/**
 * A checkpoint before each workload: every page the workload then touches first writes a full-page
 * image, whatever the server's own checkpoint timing, so WAL bytes repeat from run to run.
 */
export async function checkpoint(db: Db): Promise<void> {
  await queryRows(db, 'CHECKPOINT');
}

async function readOnce(db: Db): Promise<ServerFigures> {
  const [row] = await queryRows<{ rows: number; hot: number; lsn: string }>(
    db,
    `SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint AS rows, coalesce(sum(n_tup_hot_upd), 0)::bigint AS hot,
            pg_current_wal_flush_lsn()::text AS lsn
       FROM pg_stat_user_tables`,
  );
  return { rowsWritten: Number(row.rows), hotUpdates: Number(row.hot), walPosition: row.lsn };
}

/**
 * The figures once every other backend of the database has gone: a backend reports its table counts
 * at most once a second and when it exits, so the product's connections are closed before this is called.
 * The statistics snapshot is cleared on each read, and the read is repeated until it holds still.
 */
export async function readSettledFigures(db: Db): Promise<ServerFigures> {
  await waitUntil(
    async () =>
      (await queryRows<{ n: number }>(db, "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name <> ?", [MEASURING_APP]))[0].n === 0,
    'the product connections to close',
    15000,
    50,
  );
  let last = await readOnce(db);
  for (let i = 0; i < 50; i++) {
    await new Promise((r) => setTimeout(r, 100));
    await queryRows(db, 'SELECT pg_stat_clear_snapshot()');
    const next = await readOnce(db);
    if (next.rowsWritten === last.rowsWritten && next.hotUpdates === last.hotUpdates) return next;
    last = next;
  }
  return last;
}

/** The figures before a workload: nothing is running on the database yet. */
export async function readFigures(db: Db): Promise<ServerFigures> {
  await queryRows(db, 'SELECT pg_stat_clear_snapshot()');
  return readOnce(db);
}
