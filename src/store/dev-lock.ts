import { linkSync, mkdirSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync, closeSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * The lock of a `stepwise dev` data folder (`.stepwise/dev.lock`): one live `stepwise dev` per folder.
 *
 * A file, created exclusively (a hard link of a complete temporary file, so that nobody ever reads half
 * of one), that names its owner: pid, the process's start time (Linux: /proc/<pid>/stat field 22) and
 * the boot id. The owner is alive when `process.kill(pid, 0)` finds the pid *and* the process with that
 * pid started when the owner did, on the same boot: a pid reused by another process, or a lock from
 * before a reboot, is recognised as stale. Once the owner is known, it adds its API and database URLs,
 * which a second `stepwise dev` prints when it refuses to start.
 *
 * Why a file rather than PostgreSQL's own `postmaster.pid` and a connection check: the folder's owner
 * is the `stepwise dev` process, not its PostgreSQL. The lock is taken before PostgreSQL starts (a
 * second `dev` exits before it touches anything), it can name the running one's API, and it tells a
 * PostgreSQL left behind by a killed `dev` (owner gone: stop it and go on) from one that a live `dev`
 * is using (never touched). Where /proc is missing (macOS), only the pid is checked.
 */

export interface DevLockOwner {
  pid: number;
  /** Start time of the process, in clock ticks after boot (Linux). */
  start?: string;
  boot?: string;
  host: string;
  since: string;
  /** The API, once it listens. */
  url?: string;
  databaseUrl?: string;
}

/** The folder is in use by a live owner. */
export class DataFolderInUseError extends Error {
  constructor(
    readonly dir: string,
    readonly owner: DevLockOwner,
  ) {
    const serving = owner.url ? `serving ${owner.url}${owner.databaseUrl ? `, database ${owner.databaseUrl}` : ''}` : 'still starting';
    const who = owner.pid > 0 ? `pid ${owner.pid}, ${serving}` : 'starting';
    const stop = owner.pid > 0 ? `Ctrl-C in its terminal, or kill ${owner.pid}` : 'Ctrl-C in its terminal';
    super(`${dir} is in use by another stepwise dev (${who}): stop that one first (${stop}), or run this one from another folder or with DATABASE_URL set`);
  }
}

export interface DevLock {
  readonly file: string;
  /** Records the owner's URLs in the lock, for anyone refused. */
  update(fields: Pick<DevLockOwner, 'url' | 'databaseUrl'>): void;
  /** Removes the lock if it is still ours. Idempotent. */
  release(): void;
}

function readProc(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** The start time of `pid` in clock ticks since boot, where /proc has it. */
export function processStartTime(pid: number): string | undefined {
  const stat = readProc(`/proc/${pid}/stat`);
  if (!stat) return undefined;
  // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

const bootId = () => readProc('/proc/sys/kernel/random/boot_id')?.trim();

/** True when a process with this pid exists (EPERM: it does, another user's). */
export function isPidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** True when the process that took the lock still runs. */
export function isOwnerAlive(owner: DevLockOwner): boolean {
  const boot = bootId();
  if (owner.boot && boot && owner.boot !== boot) return false;
  if (!isPidAlive(owner.pid)) return false;
  const start = processStartTime(owner.pid);
  return !(owner.start && start && owner.start !== start);
}

function me(): DevLockOwner {
  return { pid: process.pid, start: processStartTime(process.pid), boot: bootId(), host: os.hostname(), since: new Date().toISOString() };
}

/** Creates `file` with `content` unless it exists (EEXIST), never leaving it half-written. */
function createExclusive(file: string, content: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, content, { mode: 0o644 });
  try {
    linkSync(tmp, file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err;
    // A file system without hard links: O_EXCL, written at once.
    const fd = openSync(file, 'wx', 0o644);
    try {
      writeSync(fd, content);
    } finally {
      closeSync(fd);
    }
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // already gone
    }
  }
}

function readOwner(file: string): { owner?: DevLockOwner; ino: number; mtimeMs: number } | undefined {
  try {
    const st = statSync(file);
    const text = readFileSync(file, 'utf8');
    try {
      return { owner: JSON.parse(text) as DevLockOwner, ino: st.ino, mtimeMs: st.mtimeMs };
    } catch {
      return { ino: st.ino, mtimeMs: st.mtimeMs };
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Takes the lock of `dir` for this process, or throws DataFolderInUseError naming the live owner. A
 * stale lock (its owner gone) is moved aside and the lock taken over; when two processes recover the
 * same stale lock at once, the inode check keeps the one that lost from removing the winner's lock.
 */
export function acquireDevLock(dir: string): DevLock {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'dev.lock');
  const mine = me();
  for (let attempt = 0; attempt < 10; attempt++) {
    try {
      createExclusive(file, `${JSON.stringify(mine)}\n`);
      return ownLock(file, mine);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const held = readOwner(file);
    if (!held) continue; // released meanwhile
    if (held.owner && isOwnerAlive(held.owner)) throw new DataFolderInUseError(dir, held.owner);
    // Unreadable and fresh: someone is writing it (only without hard links). Treat as held.
    if (!held.owner && Date.now() - held.mtimeMs < 10000) throw new DataFolderInUseError(dir, { pid: 0, host: '?', since: '?' });
    const aside = `${file}.stale.${process.pid}`;
    try {
      renameSync(file, aside);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    if (statSync(aside).ino !== held.ino) {
      // Another process took the stale lock over between our read and the rename: give it back.
      try {
        linkSync(aside, file);
      } catch {
        // a third one holds it now; our next attempt reads that
      }
    }
    unlinkSync(aside);
  }
  throw new Error(`could not take the lock ${file}`);
}

function ownLock(file: string, mine: DevLockOwner): DevLock {
  let current = mine;
  let released = false;
  const stillOurs = () => {
    const held = readOwner(file);
    return held?.owner?.pid === mine.pid && held.owner.start === mine.start && held.owner.since === mine.since;
  };
  const release = () => {
    if (released) return;
    released = true;
    process.removeListener('exit', release);
    try {
      if (stillOurs()) unlinkSync(file);
    } catch {
      // nothing to release
    }
  };
  process.once('exit', release);
  return {
    file,
    update(fields) {
      if (released || !stillOurs()) return;
      current = { ...current, ...fields };
      const tmp = `${file}.${process.pid}.tmp`;
      writeFileSync(tmp, `${JSON.stringify(current)}\n`, { mode: 0o644 });
      renameSync(tmp, file);
    },
    release,
  };
}
