// What PostgreSQL spends on a piece of work: its server processes' CPU time, the WAL it wrote and the
// rows its backends inserted, updated and deleted, read before and after. Shared by the `cost` extra
// and `make scale`.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';

export interface PgSnapshot {
  /** CPU of the whole server (postmaster, live children, and the children it reaped), or null when unreadable. */
  cpuMs: number | null;
  /** pg_current_wal_lsn() as a byte position. */
  walLsn: string;
  rowsWritten: number;
  /** Transactions the database committed or rolled back (each statement outside BEGIN is one). */
  transactions: number;
}

export interface PgCost {
  cpuMs: number | null;
  walBytes: number;
  rowsWritten: number;
  transactions: number;
}

const TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** Fields of /proc/<pid>/stat after the command name (which may hold spaces): index 0 is the state. */
function statFields(pid: number): string[] {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

/** The CPU a live process has used so far (user and system), in ms. */
export function processCpuMs(pid: number): number {
  const f = statFields(pid);
  return ((Number(f[11]) + Number(f[12])) * 1000) / TICKS;
}

/**
 * The server's CPU in ms: the postmaster's own and reaped children's time (utime, stime, cutime,
 * cstime), plus every live child's. A backend that exits between two reads moves from the second sum
 * to the first, so nothing is counted twice or lost. Needs the data directory and /proc readable
 * (a local server, run as its owner or root).
 */
function serverCpuMs(dataDirectory: string): number | null {
  try {
    const postmaster = Number(readFileSync(path.join(dataDirectory, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const own = statFields(postmaster);
    // utime, stime, cutime, cstime are fields 14-17 of stat, 11-14 here.
    let ticks = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const f = statFields(Number(entry));
        if (Number(f[1]) === postmaster) ticks += Number(f[11]) + Number(f[12]);
      } catch {
        // Gone meanwhile: its time is the postmaster's now.
      }
    }
    return (ticks * 1000) / TICKS;
  } catch {
    return null;
  }
}

/**
 * A snapshot of the server `url` points at and of its database. Row counts come from
 * pg_stat_database, which backends report when their transactions end (at most once a second) and
 * when they exit: close the pools of the work measured before the second snapshot.
 */
export async function pgSnapshot(url: string): Promise<PgSnapshot> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ dir: string; lsn: string; written: string; transactions: string }>(
      `SELECT current_setting('data_directory') AS dir, pg_current_wal_lsn()::text AS lsn,
              (tup_inserted + tup_updated + tup_deleted)::text AS written, (xact_commit + xact_rollback)::text AS transactions
         FROM pg_stat_database WHERE datname = current_database()`,
    );
    return { cpuMs: serverCpuMs(rows[0].dir), walLsn: rows[0].lsn, rowsWritten: Number(rows[0].written), transactions: Number(rows[0].transactions) };
  } finally {
    await client.end();
  }
}

/** What the server spent between two snapshots. */
export async function pgCostBetween(url: string, before: PgSnapshot, after: PgSnapshot): Promise<PgCost> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ bytes: string }>('SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text AS bytes', [after.walLsn, before.walLsn]);
    return {
      cpuMs: before.cpuMs === null || after.cpuMs === null ? null : after.cpuMs - before.cpuMs,
      walBytes: Number(rows[0].bytes),
      rowsWritten: after.rowsWritten - before.rowsWritten,
      transactions: after.transactions - before.transactions,
    };
  } finally {
    await client.end();
  }
}
