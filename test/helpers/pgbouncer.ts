import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { closedPort } from './stepwise-cli';

/** Debian installs it in /usr/sbin, which a non-root PATH may lack (scripts/install-pgbouncer.sh). */
const CANDIDATES = [process.env.STEPWISE_PGBOUNCER, ...(process.env.PATH ?? '').split(':').map((d) => path.join(d, 'pgbouncer')), '/usr/sbin/pgbouncer'];

/** The pgbouncer binary, or undefined when it is not installed. */
export function findPgBouncer(): string | undefined {
  return CANDIDATES.find((p): p is string => !!p && existsSync(p));
}

/** A PgBouncer started by a test, in front of one PostgreSQL server. */
export interface TestPgBouncer {
  /** `directUrl` with PgBouncer's host and port: the same database and user, through the pooler. */
  pooledUrl(directUrl: string): string;
  /** Its log so far (connections, errors). */
  output(): string;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** Any URL of the server to pool (its host, port, user and password are used). */
  serverUrl: string;
  /** Server connections per database and user. */
  poolSize: number;
}

const quote = (s: string) => `"${s.replace(/"/g, '""')}"`;

/** pgbouncer.ini: every database of the server (`*`), in transaction mode, trust for clients on loopback. */
function iniText(dir: string, port: number, server: URL, poolSize: number): string {
  return [
    '[databases]',
    `* = host=${server.hostname} port=${server.port || 5432}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'pool_mode = transaction',
    `default_pool_size = ${poolSize}`,
    'max_client_conn = 500',
    // Clients are not authenticated (loopback only); the auth file holds the password pgbouncer logs in with.
    'auth_type = trust',
    `auth_file = ${path.join(dir, 'userlist.txt')}`,
    'admin_users =',
    'server_check_delay = 0',
    'verbose = 0',
    '',
  ].join('\n');
}

/**
 * Starts pgbouncer (transaction pool mode) on a free loopback port, its ini and auth file in a
 * folder of its own. As root it runs as `postgres` (it refuses root), so the folder is readable by all.
 */
export async function startPgBouncer(binary: string, options: PgBouncerOptions): Promise<TestPgBouncer> {
  const server = new URL(options.serverUrl);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-pgbouncer-'));
  chmodSync(dir, 0o755);
  const port = await closedPort();
  writeFileSync(path.join(dir, 'userlist.txt'), `${quote(decodeURIComponent(server.username))} ${quote(decodeURIComponent(server.password))}\n`, { mode: 0o644 });
  writeFileSync(path.join(dir, 'pgbouncer.ini'), iniText(dir, port, server, options.poolSize), { mode: 0o644 });
  const asRoot = process.getuid?.() === 0;
  const args = [...(asRoot ? ['-u', runAsUser()] : []), path.join(dir, 'pgbouncer.ini')];
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await acceptsConnections(port, child, () => out);
  } catch (err) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    pooledUrl(directUrl) {
      const url = new URL(directUrl);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      return url.toString();
    },
    output: () => out,
    async stop() {
      // SIGINT: a safe shutdown, waiting for nothing (SIGTERM would wait for clients to leave).
      if (child.exitCode === null) child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The unprivileged user a root-started pgbouncer switches to: embedded PostgreSQL's. */
function runAsUser(): string {
  const found = spawnSync('id', ['-u', 'postgres'], { stdio: 'ignore' }).status === 0;
  if (!found) throw new Error("pgbouncer cannot run as root and there is no 'postgres' user to run it as");
  return 'postgres';
}

/** Resolves once the port accepts a TCP connection; rejects if pgbouncer exits first or within 10 s. */
async function acceptsConnections(port: number, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`pgbouncer exited (${child.exitCode ?? child.signalCode}): ${output()}`);
    if (await connects(port)) return;
    if (Date.now() > deadline) throw new Error(`pgbouncer did not listen on ${port}: ${output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function connects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}
