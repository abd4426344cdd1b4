// `stepwise dev` with embedded PostgreSQL, as a user runs it: what it prints, and that it owns its data
// folder (a second one on the same folder exits at once; one left behind by a killed `dev` is
// recovered). Each test runs in a temporary folder of its own, so `.stepwise/` is a fresh one.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { waitUntil } from '../helpers/wait-until';
import { isPidAlive } from '../../src/store/dev-lock';

jest.setTimeout(180000);

const ROOT = path.join(__dirname, '..', '..');
const BIN = path.join(ROOT, 'bin', 'stepwise.js');
const TASKS = path.join(ROOT, 'test', 'fixtures', 'tasks-cjs.js');

interface Dev {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

const started: Dev[] = [];

function startDev(cwd: string, options: { port?: number; env?: NodeJS.ProcessEnv } = {}): Dev {
  const child = spawn(process.execPath, [BIN, 'dev', '--port', String(options.port ?? 0), '--tasks', TASKS], {
    cwd,
    env: { ...process.env, STEPWISE_FROM_SOURCE: '1', LOG_LEVEL: 'warn', DATABASE_URL: '', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const dev = { child, output: () => out, exited };
  started.push(dev);
  return dev;
}

interface Banner {
  url: string;
  databaseUrl: string;
}

/** Waits for the banner `dev` prints once ready, and reads the URLs from it. */
async function ready(dev: Dev): Promise<Banner> {
  let exitCode: number | null | undefined;
  void dev.exited.then((code) => (exitCode = code));
  return waitUntil(
    () => {
      if (exitCode !== undefined) throw new Error(`dev exited (${exitCode}) before it was ready: ${dev.output()}`);
      const api = /Stepwise is running at (http:\/\/\S+)\/api\/v1\n/.exec(dev.output());
      const db = /^ {2}database: +(postgres:\/\/\S+) \(embedded; data in \.stepwise\/pgdata\)$/m.exec(dev.output());
      return api && db ? { url: api[1], databaseUrl: db[1] } : undefined;
    },
    'stepwise dev to print its URLs',
    120000,
    50,
  );
}

async function query<T extends object>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

const postmasterPid = (cwd: string) => Number(readFileSync(path.join(cwd, '.stepwise', 'pgdata', 'postmaster.pid'), 'utf8').split('\n')[0]);

let cwd: string;
beforeEach(() => {
  cwd = mkdtempSync(path.join(os.tmpdir(), 'stepwise-dev-test-'));
  chmodSync(cwd, 0o755);
});
afterEach(async () => {
  for (const dev of started.splice(0)) {
    if (dev.child.exitCode === null && dev.child.signalCode === null) {
      dev.child.kill('SIGKILL');
      await dev.exited;
    }
  }
  // A server left by a SIGKILLed dev: stop it before removing its folder.
  const pidFile = path.join(cwd, '.stepwise', 'pgdata', 'postmaster.pid');
  if (existsSync(pidFile)) {
    const pid = postmasterPid(cwd);
    if (pid > 0 && isPidAlive(pid)) {
      process.kill(pid, 'SIGQUIT');
      await waitUntil(() => !isPidAlive(pid), 'the left-over server to stop', 15000);
    }
  }
  rmSync(cwd, { recursive: true, force: true });
});

describe('stepwise dev', () => {
  test('prints the API, dashboard, API reference and database URLs; the database URL works', async () => {
    const dev = startDev(cwd);
    const { url, databaseUrl } = await ready(dev);
    expect(dev.output()).toContain(`  dashboard:     ${url}/ui\n`);
    expect(dev.output()).toContain(`  API reference: ${url}/docs\n`);
    expect(databaseUrl).toMatch(/^postgres:\/\/postgres:postgres@127\.0\.0\.1:\d+\/stepwise$/);
    // psql or schedule() in your own transaction would use it: the schema is there, migrated.
    const [row] = await query<{ n: number }>(databaseUrl, `SELECT count(*)::int AS n FROM stepwise.executions`);
    expect(row.n).toBe(0);
    // GET / leads to the dashboard.
    const root = await fetch(`${url}/`, { redirect: 'manual' });
    expect([root.status, root.headers.get('location')]).toEqual([302, '/ui/']);
    dev.child.kill('SIGTERM');
    expect(await dev.exited).toBe(0);
    expect(existsSync(path.join(cwd, '.stepwise', 'dev.lock'))).toBe(false);
  });

  test('a second dev on the same folder exits at once naming the first; the first keeps working', async () => {
    const first = startDev(cwd);
    const { url, databaseUrl } = await ready(first);
    const serverPid = postmasterPid(cwd);

    const second = startDev(cwd);
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([second.exited, new Promise((r) => (timer = setTimeout(() => r('still running'), 30000)))]);
    clearTimeout(timer);
    expect(code).toBe(1);
    const message = second.output().trim();
    expect(message).toBe(
      `stepwise: ${path.join(cwd, '.stepwise')} is in use by another stepwise dev (pid ${first.child.pid}, serving ${url}, database ${databaseUrl}): ` +
        `stop that one first (Ctrl-C in its terminal, or kill ${first.child.pid}), or run this one from another folder or with DATABASE_URL set`,
    );

    // The first one's PostgreSQL was not touched, and the first one still serves and runs executions.
    expect(postmasterPid(cwd)).toBe(serverPid);
    expect(isPidAlive(serverPid)).toBe(true);
    const scheduled = await fetch(`${url}/api/v1/executions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ task: 'cjs-task', data: { n: 5 } }),
    });
    expect(scheduled.status).toBe(201);
    const { execution_id: id } = (await scheduled.json()) as { execution_id: string };
    const done = (await (await fetch(`${url}/api/v1/executions/${id}/wait?timeout=30`)).json()) as { status: string; output: unknown };
    expect(done).toMatchObject({ status: 'completed', output: { tripled: 15, from: 'js' } });
    expect(await query(databaseUrl, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);

    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(isPidAlive(serverPid)).toBe(false);
  });

  test('after a dev was killed (SIGKILL), the next one recovers the folder: stale lock, left-over server', async () => {
    const killed = startDev(cwd);
    await ready(killed);
    const leftOver = postmasterPid(cwd);
    killed.child.kill('SIGKILL');
    await killed.exited;
    expect(isPidAlive(leftOver)).toBe(true); // its own process group: SIGKILL of dev leaves it running
    expect(existsSync(path.join(cwd, '.stepwise', 'dev.lock'))).toBe(true);

    const next = startDev(cwd);
    const { databaseUrl } = await ready(next);
    expect(isPidAlive(leftOver)).toBe(false);
    expect(postmasterPid(cwd)).not.toBe(leftOver);
    expect(await query(databaseUrl, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    next.child.kill('SIGTERM');
    expect(await next.exited).toBe(0);
  });

  test('a taken API port is reported before anything starts: no .stepwise/ is made', async () => {
    await withTakenPort(async (port) => {
      const dev = startDev(cwd, { port });
      expect(await dev.exited).toBe(1);
      expect(dev.output()).toBe(`stepwise: port ${port} is already in use: choose another with --port or PORT\n`);
      expect(existsSync(path.join(cwd, '.stepwise'))).toBe(false);
    });
  });

  test('STEPWISE_EMBEDDED_PORT chooses the database port; a taken one is a clear error', async () => {
    await withTakenPort(async (port) => {
      const dev = startDev(cwd, { env: { STEPWISE_EMBEDDED_PORT: String(port) } });
      expect(await dev.exited).toBe(1);
      expect(dev.output()).toContain(`stepwise: embedded PostgreSQL: port ${port} is already in use: choose another with STEPWISE_EMBEDDED_PORT`);
    });
    const free = await withTakenPort(async (port) => port); // free again once let go
    const dev = startDev(cwd, { env: { STEPWISE_EMBEDDED_PORT: String(free) } });
    const { databaseUrl } = await ready(dev);
    expect(new URL(databaseUrl).port).toBe(String(free));
    dev.child.kill('SIGTERM');
    expect(await dev.exited).toBe(0);
  });
});

/** Runs `body` while a server of this test holds a loopback port. */
async function withTakenPort<T>(body: (port: number) => Promise<T>): Promise<T> {
  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
  try {
    return await body((blocker.address() as net.AddressInfo).port);
  } finally {
    await new Promise((resolve) => blocker.close(resolve));
  }
}
