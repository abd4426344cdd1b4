// A durable sleep wakes at its time, not at the next poll (issue #33): the worker that paused an
// execution arms a timer for when it comes due and claims it then.
import { defineTask, Type } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { insertExecutions } from '../../src/store/executions';
import { queryRows } from '../../src/store/db';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

/** The poll interval a worker has unless told otherwise: every wake-up below must come far sooner. */
const DEFAULT_POLL_MS = 1000;
/** Far below the poll interval, far above a wake-up's cost on a loaded machine. */
const MAX_LATENESS_MS = 250;

let t: TestDatabase;
const workers: Worker[] = [];

const napper = defineTask({
  name: 'napper',
  data: Type.Object({ ms: Type.Integer() }),
  async run(ctx, data) {
    await ctx.sleep('nap', data.ms);
    return 'awake';
  },
});

const napperTwice = defineTask({
  name: 'napper-twice',
  data: Type.Object({ ms: Type.Integer() }),
  async run(ctx, data) {
    await ctx.sleep('first', data.ms);
    await ctx.sleep('second', data.ms);
    return 'awake';
  },
});

beforeAll(async () => {
  t = await createTestDatabase();
  // Two workers: each wakes the executions it paused; neither may leave one to the other's poll.
  for (let i = 0; i < 2; i++) workers.push(await startWorker(t, [napper, napperTwice], { pollIntervalMs: DEFAULT_POLL_MS }));
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await t.drop();
});

/** How late each sleep of these executions ended, in ms on the database's clock, once all have. */
async function latenessOf(ids: string[], sleeps: number): Promise<number[]> {
  const rows = await waitUntil(
    async () => {
      const done = await queryRows<{ late_ms: number }>(
        t.db,
        `SELECT (extract(epoch FROM s.completed_at - s.wake_at) * 1000)::float8 AS late_ms
           FROM stepwise.steps s JOIN stepwise.executions e ON e.id = s.execution_id
          WHERE s.execution_id = ANY(?::uuid[]) AND s.kind = 'sleep' AND s.completed AND e.status = 'completed'`,
        [ids],
      );
      return done.length === ids.length * sleeps ? done : undefined;
    },
    'every sleep to end',
    20_000,
  );
  return rows.map((r) => r.late_ms);
}

describe('durable sleep wake-up', () => {
  test('sleeps of 300-1500 ms each wake well within the poll interval of their time', async () => {
    const durations = Array.from({ length: 20 }, (_, i) => 300 + Math.round((i * 1200) / 19));
    const scheduled = await insertExecutions(t.db, durations.map((ms) => ({ task: 'napper', data: { ms } })));
    const lateness = await latenessOf(scheduled.map((s) => s.execution.id), 1);
    expect(lateness.every((ms) => ms >= 0)).toBe(true);
    expect(Math.max(...lateness)).toBeLessThan(MAX_LATENESS_MS);
  });

  test('a second sleep after a resumed one wakes on time too', async () => {
    const durations = Array.from({ length: 6 }, (_, i) => 1000 + i * 97);
    const scheduled = await insertExecutions(t.db, durations.map((ms) => ({ task: 'napper-twice', data: { ms } })));
    const lateness = await latenessOf(scheduled.map((s) => s.execution.id), 2);
    expect(Math.max(...lateness)).toBeLessThan(MAX_LATENESS_MS);
  });
});

describe('delayed start', () => {
  test('executions scheduled to start later are claimed at their start, not at a poll', async () => {
    // Several workers, polls of a second stretching further while idle: only the delayed schedule's
    // notification can bring the claim within the bound.
    const now = Date.now();
    const offsets = Array.from({ length: 8 }, (_, i) => 700 + i * 150);
    const scheduled = await insertExecutions(t.db, offsets.map((ms) => ({ task: 'napper', data: { ms: 0 }, startAt: new Date(now + ms) })));
    const ids = scheduled.map((s) => s.execution.id);
    const rows = await waitUntil(
      async () => {
        const started = await queryRows<{ late_ms: number }>(
          t.db,
          `SELECT (extract(epoch FROM started_at - start_at) * 1000)::float8 AS late_ms
             FROM stepwise.executions WHERE id = ANY(?::uuid[]) AND started_at IS NOT NULL`,
          [ids],
        );
        return started.length === ids.length ? started : undefined;
      },
      'every delayed execution to start',
      20_000,
    );
    const lateness = rows.map((r) => r.late_ms);
    expect(lateness.every((ms) => ms >= 0)).toBe(true);
    expect(Math.max(...lateness)).toBeLessThan(MAX_LATENESS_MS);
  });
});
