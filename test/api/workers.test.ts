// GET /workers and the live worker counts of GET /tasks, with real workers (in process and spawned).
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { defineTask } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { registerWorker } from '../../src/store/workers';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { spawnTsx } from '../helpers/processes';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const VERSION = (require('../../package.json') as { version: string }).version;
/**
 * Fast beats, so that tests see heartbeats in a fraction of a second, and a loss threshold far above
 * them: on a loaded machine a beat comes late, and three missed beats would list a live worker lost.
 */
const FAST = { heartbeatIntervalMs: 50, lostAfterMs: 10_000 };

let api: TestApi;
const running: Worker[] = [];

beforeAll(async () => {
  api = await startTestApi();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((w) => w.stop()));
});
afterAll(async () => {
  await api.close();
});

/** A task whose handler waits until the test opens its gate. */
function gatedTask(name = uniqueTask('gated')) {
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const task = defineTask({
    name,
    async run() {
      await gate;
      return 'done';
    },
  });
  return { task, open };
}

function quickTask(name = uniqueTask('quick')) {
  return defineTask({ name, async run() { return 1; } });
}

async function start(tasks: object[], options: Parameters<typeof startWorker>[2] = {}): Promise<Worker> {
  const worker = await startWorker(api.t, tasks as never, { ...FAST, ...options });
  running.push(worker);
  return worker;
}

async function listed(workerId: string) {
  return (await api.client.listWorkers()).find((w) => w.worker_id === workerId);
}

async function liveWorkersOf(task: string): Promise<number | undefined> {
  return (await api.client.listTasks()).find((t) => t.name === task)?.workers;
}

describe('GET /workers', () => {
  test('lists a started worker as active, with exactly the fields of the contract', async () => {
    const b = quickTask(uniqueTask('b'));
    const a = defineTask({ name: uniqueTask('a'), version: 7, run: async () => 'ok' });
    const worker = await start([b, a], { concurrency: 3 });
    expect(await listed(worker.id)).toEqual({
      worker_id: worker.id,
      hostname: hostname(),
      pid: process.pid,
      version: VERSION,
      tasks: [a.name, b.name],
      task_versions: { [a.name]: '7', [b.name]: null },
      concurrency: 3,
      running: 0,
      started_at: expect.stringMatching(ISO_MS),
      last_seen_at: expect.stringMatching(ISO_MS),
      state: 'active',
    });
  });

  test('heartbeats move last_seen_at forward and report the handlers running', async () => {
    const { task, open } = gatedTask();
    const worker = await start([task]);
    const first = (await listed(worker.id))?.last_seen_at as string;
    await waitUntil(async () => ((await listed(worker.id))?.last_seen_at ?? '') > first, 'a heartbeat to move last_seen_at');
    await api.client.schedule(task.name);
    await waitUntil(async () => (await listed(worker.id))?.running === 1, 'a heartbeat to report the running handler');
    open();
    await waitUntil(async () => (await listed(worker.id))?.running === 0, 'a heartbeat to report the handler finished');
    expect((await listed(worker.id))?.state).toBe('active');
  });

  test('a worker is listed as stopping while its shutdown drains, and is gone once it stopped', async () => {
    const { task, open } = gatedTask();
    const worker = await startWorker(api.t, [task] as never, { ...FAST, shutdownGraceMs: 20_000 });
    await api.client.schedule(task.name);
    await waitUntil(async () => (await listed(worker.id))?.running === 1, 'the handler to run');
    const stopped = worker.stop();
    try {
      await waitUntil(async () => (await listed(worker.id))?.state === 'stopping', 'the worker to be listed as stopping');
      // Heartbeats go on during the drain: a long shutdown is not mistaken for a lost worker.
      const seen = (await listed(worker.id))?.last_seen_at as string;
      await waitUntil(async () => ((await listed(worker.id))?.last_seen_at ?? '') > seen, 'a heartbeat while stopping');
      expect((await listed(worker.id))?.state).toBe('stopping');
      // A stopping worker claims nothing more: it is not a live worker of its task.
      expect(await liveWorkersOf(task.name)).toBe(0);
    } finally {
      open();
      await stopped;
    }
    expect(await listed(worker.id)).toBeUndefined();
  });

  test('a worker killed without stopping is listed as lost once it missed its beats', async () => {
    // Lost after a second of silence: soon enough to watch, and not after one late beat of a loaded machine.
    const env = { DATABASE_URL: api.t.url, SIDE_EFFECT_LOG: '/dev/null', STEPWISE_HEARTBEAT_INTERVAL_MS: '100', STEPWISE_LOST_AFTER_MS: '1000' };
    const proc = await spawnTsx('test/fixtures/worker-process.ts', ['test/fixtures/crash-tasks.ts'], env);
    try {
      const mine = async () => (await api.client.listWorkers()).find((w) => w.pid === proc.child.pid);
      const active = await waitUntil(async () => ((await mine())?.state === 'active' ? mine() : undefined), 'the spawned worker to register');
      expect(active).toMatchObject({ hostname: hostname(), version: VERSION, tasks: ['crashy'], concurrency: 4, state: 'active' });
      expect(await liveWorkersOf('crashy')).toBe(1);
      proc.child.kill('SIGKILL');
      await proc.exited;
      const lost = await waitUntil(async () => ((await mine())?.state === 'lost' ? mine() : undefined), 'the killed worker to be listed as lost');
      expect(lost.worker_id).toBe(active.worker_id);
      expect(await liveWorkersOf('crashy')).toBe(0);
    } finally {
      proc.child.kill('SIGKILL');
    }
  });
});

describe('GET /tasks workers', () => {
  test('counts the live workers of each task: 0 for a task nobody serves, and neither lost nor stopped ones', async () => {
    const [a, b] = [quickTask(uniqueTask('a')), quickTask(uniqueTask('b'))];
    const orphan = uniqueTask('orphan');
    await registerTask(api.db, orphan);
    // The row of a worker that fell silent long ago (its threshold is 1 ms): lost, so not counted.
    await registerWorker(api.db, { id: randomUUID(), hostname: 'gone', pid: 1, version: VERSION, tasks: [orphan], concurrency: 1, running: 0, lostAfterMs: 1 });
    await start([a, b]);
    const second = await start([a]);
    await waitUntil(async () => (await api.client.listWorkers()).some((w) => w.hostname === 'gone' && w.state === 'lost'), 'the silent row to be lost');
    const counts = async () => Object.fromEntries((await api.client.listTasks()).filter((t) => [a.name, b.name, orphan].includes(t.name)).map((t) => [t.name, t.workers]));
    expect(await counts()).toEqual({ [a.name]: 2, [b.name]: 1, [orphan]: 0 });
    await second.stop();
    expect(await counts()).toEqual({ [a.name]: 1, [b.name]: 1, [orphan]: 0 });
  });
});
