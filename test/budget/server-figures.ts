import { queryRows, type Db } from '../../src/store/db';
import { waitUntil } from '../helpers/wait-until';

/** What the server reports written: rows of the test database's tables and WAL of the whole cluster. */
export interface ServerFigures {
  /** Rows inserted, updated and deleted in the database's own tables. */
  rowsWritten: number;
  /** Of the updates, those that were HOT (no index entry written): informative, not budgeted. */
  hotUpdates: number;
  /** WAL position in bytes: cluster-wide, so the budget runs alone (Makefile `test`, jest.budget.config.js). */
  walPosition: bigint;
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
            (pg_current_wal_lsn() - '0/0'::pg_lsn)::text AS lsn
       FROM pg_stat_user_tables`,
  );
  return { rowsWritten: Number(row.rows), hotUpdates: Number(row.hot), walPosition: BigInt(row.lsn.split('.')[0]) };
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
