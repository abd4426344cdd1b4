import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { queryRows } from '../../src/store/db';
import { getExecution, insertExecutions } from '../../src/store/executions';
import { startTestApi } from '../helpers/api-server';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';

const ROOT = path.join(__dirname, '..', '..');
const BIN = path.join(ROOT, 'bin', 'stepwise.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real `stepwise` command from source and collects its output. */
function stepwise(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 30000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: { ...process.env, STEPWISE_FROM_SOURCE: '1', LOG_LEVEL: 'warn', DATABASE_URL: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`stepwise ${args.join(' ')} did not exit: ${stdout}${stderr}`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

describe('stepwise command line', () => {
  test.each(['dev', 'serve', 'worker', 'migrate', 'prune'])('%s --help prints its usage and exits 0', async (command) => {
    const r = await stepwise([command, '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Usage: stepwise ${command}`);
  });

  test('a tasks file that does not exist is a one-line error', async () => {
    const r = await stepwise(['worker', '--tasks', 'test/fixtures/missing.ts'], { DATABASE_URL: t.url });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe('stepwise: tasks file test/fixtures/missing.ts does not exist');
  });

  test('a tasks file that fails to compile, or defines no task, is a clear error', async () => {
    const broken = await stepwise(['worker', '--tasks', 'test/fixtures/tasks-broken.ts'], { DATABASE_URL: t.url });
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain('stepwise: tasks file test/fixtures/tasks-broken.ts failed to load');
    const empty = await stepwise(['worker', '--tasks', 'test/fixtures/tasks-empty.ts'], { DATABASE_URL: t.url });
    expect(empty.code).toBe(1);
    expect(empty.stderr.trim()).toBe('stepwise: tasks file test/fixtures/tasks-empty.ts exports no task made by defineTask');
  });

  test('a malformed or unreachable DATABASE_URL is a clear error that never shows the password', async () => {
    const malformed = await stepwise(['migrate'], { DATABASE_URL: 'not a url' });
    expect(malformed.code).toBe(1);
    expect(malformed.stderr).toContain('DATABASE_URL is not a valid URL');
    const unreachable = await stepwise(['migrate'], { DATABASE_URL: 'postgres://me:s3cret-pw@127.0.0.1:1/nowhere' });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain('cannot connect to PostgreSQL at 127.0.0.1:1/nowhere');
    expect(unreachable.stderr).not.toContain('s3cret-pw');
  });

  test('serve without DATABASE_URL, and worker without --tasks, say what is missing', async () => {
    const serve = await stepwise(['serve']);
    expect(serve.code).toBe(1);
    expect(serve.stderr).toContain('DATABASE_URL is not set');
    const worker = await stepwise(['worker'], { DATABASE_URL: t.url });
    expect(worker.code).toBe(2);
    expect(worker.stderr).toBe("stepwise: required option '-t, --tasks <file>' not specified (see 'stepwise worker --help')\n");
  });

  test('every usage error is one line with a hint and exit 2, at any depth; help exits 0', async () => {
    const runs = await Promise.all([stepwise(['frobnicate']), stepwise(['executions', 'frobnicate']), stepwise(['serve', '--port', 'x']), stepwise(['dev', '--nope'])]);
    expect(runs.map((r) => [r.code, r.stdout, r.stderr])).toEqual([
      [2, '', "stepwise: unknown command 'frobnicate' (see 'stepwise --help')\n"],
      [2, '', "stepwise: unknown command 'frobnicate' (see 'stepwise executions --help')\n"],
      [2, '', expect.stringMatching(/^stepwise: option '-p, --port <n>' argument 'x' is invalid[^\n]* \(see 'stepwise serve --help'\)\n$/)],
      [2, '', "stepwise: unknown option '--nope' (see 'stepwise dev --help')\n"],
    ]);
    const help = await stepwise(['worker', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: stepwise worker');
  });

  test('a port already in use is a clear error', async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const r = await stepwise(['serve', '--port', String(port)], { DATABASE_URL: t.url });
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(`stepwise: port ${port} is already in use: choose another with --port or PORT`);
    } finally {
      blocker.close();
    }
  });

  test('bad configuration values are named at start-up', async () => {
    const r = await stepwise(['serve'], { DATABASE_URL: t.url, STEPWISE_CONCURRENCY: 'many' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('STEPWISE_CONCURRENCY must be an integer');
  });

  test.each([
    ['test/fixtures/tasks-esm.mjs', 'esm-task', { doubled: 42, from: 'mjs' }],
    ['test/fixtures/tasks-cjs.js', 'cjs-task', { tripled: 63, from: 'js' }],
  ])('worker --tasks %s runs the module’s tasks, importing from "stepwise-workflows"', async (file, task, output) => {
    const child = spawn(process.execPath, [BIN, 'worker', '--tasks', file, '--concurrency', '2'], {
      cwd: ROOT,
      env: { ...process.env, STEPWISE_FROM_SOURCE: '1', LOG_LEVEL: 'warn', DATABASE_URL: t.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    try {
      const [{ execution }] = await insertExecutions(t.db, [{ task, data: { n: 21 } }]);
      const done = await waitUntil(async () => {
        const e = await getExecution(t.db, execution.id);
        return e?.status === 'completed' ? e : undefined;
      }, `${task} to complete (${out})`, 20000);
      expect(done.output).toEqual(output);
    } finally {
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  });
});

describe('stepwise worker --url', () => {
  test('runs the module’s tasks through an API server, with no database, and leaves the registry when stopped', async () => {
    const api = await startTestApi({ db: { db: t.db, url: t.url }, tokens: ['cli-client-token'], workerTokens: ['remote-worker-token'] });
    const child = spawn(process.execPath, [BIN, 'worker', '--tasks', 'test/fixtures/tasks-cjs.js', '--url', api.api.url, '--token', 'remote-worker-token'], {
      cwd: ROOT,
      // No DATABASE_URL: everything goes through the API server.
      env: { ...process.env, STEPWISE_FROM_SOURCE: '1', LOG_LEVEL: 'warn', DATABASE_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    const remoteWorkers = async () => (await api.client.raw.GET('/api/v1/workers')).data?.workers.filter((w) => w.tasks.includes('cjs-task')) ?? [];
    try {
      await waitUntil(async () => (await remoteWorkers()).length === 1, `the remote worker to register (${out})`, 20000);
      const scheduled = await api.client.schedule('cjs-task', { n: 21 });
      const done = await api.client.wait(scheduled.execution_id, { timeoutSeconds: 20 });
      expect(done).toMatchObject({ status: 'completed', output: { tripled: 63, from: 'js' } });
    } finally {
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
    expect(await remoteWorkers()).toEqual([]);
    await api.close();
  });
});

/** An execution put straight into `status`, finished `daysAgo` days ago. */
async function finishedExecution(task: string, status: string, daysAgo: number): Promise<string> {
  const [{ execution }] = await insertExecutions(t.db, [{ task, data: null }]);
  await queryRows(t.db, `UPDATE stepwise.executions SET status = ?, created_at = now() - make_interval(days => ?), completed_at = now() - make_interval(days => ?), due_at = NULL WHERE id = ?`, [
    status,
    daysAgo,
    daysAgo,
    execution.id,
  ]);
  return execution.id;
}

describe('stepwise worker metrics and retention', () => {
  test('a worker-only process serves /metrics on STEPWISE_METRICS_PORT, and deletes finished executions past STEPWISE_RETENTION', async () => {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const old = await finishedExecution('retention-cli', 'completed', 3);
    const recent = await finishedExecution('retention-cli', 'completed', 1);
    const child = spawn(process.execPath, [BIN, 'worker', '--tasks', 'test/fixtures/tasks-cjs.js'], {
      cwd: ROOT,
      env: {
        ...process.env,
        STEPWISE_FROM_SOURCE: '1',
        LOG_LEVEL: 'warn',
        DATABASE_URL: t.url,
        STEPWISE_METRICS_PORT: String(port),
        STEPWISE_RETENTION: '2d',
        STEPWISE_RETENTION_SWEEP_MS: '1000',
      },
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    try {
      const text = await waitUntil(async () => {
        const res = await fetch(`http://127.0.0.1:${port}/metrics`).catch(() => undefined);
        return res?.status === 200 ? res.text() : undefined;
      }, 'the metrics endpoint', 20000);
      expect(text).toContain('stepwise_worker_slots');
      expect(text).toContain('stepwise_lease_takeovers_total');
      await waitUntil(async () => (await getExecution(t.db, old)) === undefined, 'the worker to delete the old execution', 10000);
      expect(await getExecution(t.db, recent)).toBeDefined();
      const after = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(after).toMatch(/^stepwise_executions_deleted_total 1$/m);
    } finally {
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  });
});

describe('stepwise prune', () => {
  test('deletes the finished executions older than --older-than, and only those', async () => {
    const old = [await finishedExecution('prune-cli', 'completed', 10), await finishedExecution('prune-cli', 'cancelled', 9)];
    const recent = await finishedExecution('prune-cli', 'failed', 2);
    const r = await stepwise(['prune', '--older-than', '7d'], { DATABASE_URL: t.url });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('deleted 2 finished executions\n');
    expect(await getExecution(t.db, old[0])).toBeUndefined();
    expect(await getExecution(t.db, old[1])).toBeUndefined();
    expect(await getExecution(t.db, recent)).toBeDefined();
  });

  test('uses the configured retention without --older-than', async () => {
    const old = await finishedExecution('prune-cli-config', 'completed', 5);
    const r = await stepwise(['prune'], { DATABASE_URL: t.url, STEPWISE_RETENTION: '4d' });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('deleted 1 finished execution\n');
    expect(await getExecution(t.db, old)).toBeUndefined();
  });

  test.each([
    [['prune', '--older-than', 'soon'], {}, "--older-than must be a duration such as '30d' or '12h', or 'forever'; got \"soon\""],
    [['prune', '--older-than', 'forever'], {}, '--older-than must be a duration such as 7d'],
    [['prune'], { STEPWISE_RETENTION: 'forever' }, "retention is 'forever': say how old with --older-than"],
    [['serve'], { STEPWISE_RETENTION: '10s' }, "STEPWISE_RETENTION must be at least a minute (or 'forever'); got \"10s\""],
  ])('%j with %j is a one-line error', async (args, env, message) => {
    const r = await stepwise(args, { DATABASE_URL: t.url, ...env });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`stepwise: ${message}\n`);
  });
});

describe('stepwise worker signals', () => {
  function startWorker(env: NodeJS.ProcessEnv) {
    const child = spawn(process.execPath, [BIN, 'worker', '--tasks', 'test/fixtures/crash-tasks.ts'], {
      cwd: ROOT,
      env: { ...process.env, STEPWISE_FROM_SOURCE: '1', LOG_LEVEL: 'info', DATABASE_URL: t.url, SIDE_EFFECT_LOG: '/dev/null', HANG_IN_STEP_TWO: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    return { child, exited, output: () => out };
  }

  test('SIGTERM drains for the grace period, then releases the execution; a second signal exits at once', async () => {
    // One SIGTERM: the hung handler gets the grace period, then its execution is handed back.
    const graceful = startWorker({ STEPWISE_SHUTDOWN_GRACE_MS: '1000' });
    const [{ execution: first }] = await insertExecutions(t.db, [{ task: 'crashy', data: { key: 'sig-1' } }]);
    await waitUntil(async () => (await getExecution(t.db, first.id))?.status === 'running', 'the first execution to run');
    graceful.child.kill('SIGTERM');
    expect(await graceful.exited).toBe(0);
    expect(graceful.output()).toContain('worker released executions');
    expect(await getExecution(t.db, first.id)).toMatchObject({ status: 'pending', leaseToken: null });

    // A second signal does not wait for a 60 s grace period.
    const impatient = startWorker({ STEPWISE_SHUTDOWN_GRACE_MS: '60000' });
    await waitUntil(async () => (await getExecution(t.db, first.id))?.status === 'running', 'the execution to run again');
    impatient.child.kill('SIGTERM');
    await waitUntil(() => impatient.output().includes('worker draining'), 'the worker to start draining');
    const secondAt = Date.now();
    impatient.child.kill('SIGTERM');
    expect(await impatient.exited).toBe(1);
    expect(Date.now() - secondAt).toBeLessThan(5000);
  });
});
