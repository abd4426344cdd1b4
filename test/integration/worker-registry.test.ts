// The worker registry (stepwise.workers): the engine's heartbeat and the store's reading of silence.
import { randomUUID } from 'node:crypto';
import { defineTask } from '../../src/index';
import { Worker } from '../../src/engine/worker';
import { listWorkers, registerWorker, type WorkerRegistration } from '../../src/store/workers';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';
import { quietLog, startWorker } from '../helpers/worker';

const task = defineTask({ name: 'registry-task', async run() { return 1; } });

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

/** A worker's row as a crashed worker would have left it: registered, then silent since `silentFor`. */
async function silentWorker(silentFor: string, lostAfterMs = 1000): Promise<string> {
  const w: WorkerRegistration = { id: randomUUID(), hostname: 'silent', pid: 1, version: '0.0.0', tasks: ['registry-task'], concurrency: 1, running: 0, lostAfterMs };
  await registerWorker(t.db, w);
  await t.db.raw(`UPDATE stepwise.workers SET last_seen_at = now() - ?::interval WHERE worker_id = ?`, [silentFor, w.id]);
  return w.id;
}

async function row(id: string) {
  return (await listWorkers(t.db)).find((w) => w.id === id);
}

describe('worker registry', () => {
  test('a row is reported lost once its worker was silent for longer than its own threshold', async () => {
    const recent = await silentWorker('2 seconds', 60_000);
    const silent = await silentWorker('2 seconds', 1000);
    expect((await row(recent))?.state).toBe('active');
    expect((await row(silent))?.state).toBe('lost');
  });

  test('a heartbeat registers the worker again after its row was forgotten, with its first start time', async () => {
    const worker = await startWorker(t, [task], { heartbeatIntervalMs: 50 });
    try {
      const first = await row(worker.id);
      expect(first?.state).toBe('active');
      await t.db.raw('DELETE FROM stepwise.workers WHERE worker_id = ?', [worker.id]);
      const again = await waitUntil(() => row(worker.id), 'the worker to register again');
      expect(again).toMatchObject({ state: 'active', startedAt: first?.startedAt, tasks: ['registry-task'] });
    } finally {
      await worker.stop();
    }
    expect(await row(worker.id)).toBeUndefined();
  });

  test('workers delete the rows of workers lost for longer than forgetLostAfterMs, and keep the others', async () => {
    const longGone = await silentWorker('2 hours');
    const lostLately = await silentWorker('1 minute');
    // One sweep every twelve beats: a fraction of a second at this interval.
    // Its own loss threshold far above its beats: a late beat on a loaded machine must not list it lost.
    const worker = await startWorker(t, [task], { heartbeatIntervalMs: 20, lostAfterMs: 10_000 });
    try {
      await waitUntil(async () => (await row(longGone)) === undefined, 'the long-lost worker to be forgotten');
      // The same statement kept the worker lost for a minute only (the default keeps them an hour).
      expect((await row(lostLately))?.state).toBe('lost');
      expect((await row(worker.id))?.state).toBe('active');
    } finally {
      await worker.stop();
    }
  });

  test('a loss threshold within one heartbeat interval is refused', () => {
    const options = { db: t.db, databaseUrl: t.url, tasks: [task], log: quietLog };
    expect(() => new Worker({ ...options, heartbeatIntervalMs: 1000, lostAfterMs: 1000 })).toThrow(RangeError);
    expect(() => new Worker({ ...options, heartbeatIntervalMs: 1000 })).not.toThrow();
  });
});
