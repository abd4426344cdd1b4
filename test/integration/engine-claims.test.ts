import { defineTask, Type } from '../../src/index';
import { getExecution, insertExecutions } from '../../src/store/executions';
import { cancelExecution } from '../../src/store/transitions/cancel';
import { queryRows } from '../../src/store/db';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';
import type { WorkerOptions } from '../../src/engine/worker';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

/** A task whose handlers block until released; counts the handlers that started, by execution. */
function gatedTask(name: string) {
  const started: string[] = [];
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const task = defineTask({
    name,
    data: Type.Object({ i: Type.Integer() }),
    async run(ctx, data) {
      started.push(ctx.executionId);
      await gate;
      return data.i;
    },
  });
  return { task: task as never, started, open };
}

async function schedule(task: string, n: number): Promise<string[]> {
  const rows = await insertExecutions(t.db, Array.from({ length: n }, (_, i) => ({ task, data: { i } })));
  return rows.map((r) => r.execution.id);
}

async function statuses(ids: string[]): Promise<Record<string, number>> {
  const rows = await queryRows<{ status: string; n: number }>(t.db, 'SELECT status, count(*)::int AS n FROM stepwise.executions WHERE id = ANY(?::uuid[]) GROUP BY status', [ids]);
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

describe('prefetch', () => {
  test('a worker holds at most concurrency + prefetch executions and starts the buffered ones as slots free', async () => {
    const { task, started, open } = gatedTask('prefetch-bounded');
    const ids = await schedule('prefetch-bounded', 7);
    const w = await startWorker(t, [task], { concurrency: 2, prefetch: 3, prefetchHoldMs: 60000 });
    try {
      await waitUntil(() => w.busy === 5, 'two running and three buffered');
      expect(started).toHaveLength(2);
      expect(await statuses(ids)).toEqual({ running: 5, pending: 2 });
      open();
      await waitUntil(async () => ((await statuses(ids)).completed === 7 ? true : undefined), 'all to complete');
      expect(new Set(started).size).toBe(7);
      const attempts = await queryRows<{ attempt: number }>(t.db, 'SELECT attempt FROM stepwise.executions WHERE id = ANY(?::uuid[])', [ids]);
      expect(attempts.every((r) => r.attempt === 1)).toBe(true);
    } finally {
      await w.stop();
    }
  });

  test('without a prefetch set, a worker with slow handlers claims twice its concurrency ahead, no more', async () => {
    const { task, started, open } = gatedTask('prefetch-auto-slow');
    const ids = await schedule('prefetch-auto-slow', 12);
    const w = await startWorker(t, [task], { concurrency: 2, prefetchHoldMs: 60000 });
    try {
      await waitUntil(() => w.busy === 6, 'two running and four buffered');
      expect(w.prefetchNow).toBe(4);
      expect(await statuses(ids)).toEqual({ running: 6, pending: 6 });
      expect(started).toHaveLength(2);
    } finally {
      open();
      await w.stop();
    }
  });

  test('without a prefetch set, a worker starting short handlers fast claims more ahead, up to eight times its concurrency', async () => {
    const task = defineTask({ name: 'prefetch-auto-fast', async run() {
      return null;
    } });
    const ids = await schedule('prefetch-auto-fast', 4000);
    const batches: number[] = [];
    const w = await startWorker(t, [task as never], { concurrency: 2, prefetchHoldMs: 60000, observer: { claimed: (c) => batches.push(c.length) } });
    try {
      await waitUntil(async () => ((await statuses(ids)).completed === 4000 ? true : undefined), 'all to complete', 60000);
    } finally {
      await w.stop();
    }
    // Twice the concurrency ahead would cap a claim at 2 + 4 rows; eight times, at 2 + 16.
    expect(Math.max(...batches)).toBeGreaterThan(6);
    expect(Math.max(...batches)).toBeLessThanOrEqual(18);
  });

  test('a buffered execution left waiting past prefetchHoldMs goes back to the queue, its attempt uncounted, and another worker runs it', async () => {
    const { task, started, open } = gatedTask('prefetch-hold');
    const [first, second] = await schedule('prefetch-hold', 2);
    const claimedIds = new Set<string>();
    const busy = await startWorker(t, [task], { concurrency: 1, prefetch: 1, prefetchHoldMs: 200, observer: { claimed: (c) => c.forEach((e) => claimedIds.add(e.execution.id)) } });
    try {
      await waitUntil(() => (started.length === 1 ? true : undefined), 'one handler to start');
      const buffered = started[0] === first ? second : first;
      // Pending both before its claim (a loaded machine may claim the two apart) and after the hand-back.
      await waitUntil(() => (claimedIds.has(buffered) ? true : undefined), 'the other execution to be claimed into the buffer');
      await waitUntil(async () => ((await getExecution(t.db, buffered))?.status === 'pending' ? true : undefined), 'the buffered execution to be handed back');
      expect(await getExecution(t.db, buffered)).toMatchObject({ status: 'pending', attempt: 0, leaseToken: null, startedAt: null });
      // The busy worker does not take it again while its only slot stays busy.
      await new Promise((r) => setTimeout(r, 500));
      expect(await getExecution(t.db, buffered)).toMatchObject({ status: 'pending', attempt: 0 });
      const idle = await startWorker(t, [task], { concurrency: 1, prefetch: 0 });
      try {
        await waitUntil(() => (started.includes(buffered) ? true : undefined), 'the other worker to start it');
        open();
        const done = await waitUntil(async () => {
          const e = await getExecution(t.db, buffered);
          return e?.status === 'completed' ? e : undefined;
        }, 'it to complete');
        expect(done.attempt).toBe(1);
      } finally {
        await idle.stop();
      }
    } finally {
      open();
      await busy.stop();
    }
  });

  test('stop() hands buffered executions straight back; a cancelled buffered execution never starts', async () => {
    const { task, started, open } = gatedTask('prefetch-stop');
    const ids = await schedule('prefetch-stop', 3);
    const w = await startWorker(t, [task], { concurrency: 1, prefetch: 2, prefetchHoldMs: 60000, shutdownGraceMs: 5000 });
    let running: string;
    let cancelled: string;
    let returned: string;
    try {
      await waitUntil(() => w.busy === 3, 'one running and two buffered');
      running = started[0];
      [cancelled, returned] = ids.filter((id) => id !== running);
      expect((await cancelExecution(t.db, cancelled)).kind).toBe('cancelled');
      // Its place is free at once, and nothing else is due to fill it.
      await waitUntil(() => w.busy === 2, 'the cancel to reach the worker');
    } finally {
      const stopping = w.stop();
      open();
      await stopping;
    }
    expect(started).toEqual([running]);
    expect(await getExecution(t.db, running)).toMatchObject({ status: 'completed', attempt: 1 });
    expect(await getExecution(t.db, cancelled)).toMatchObject({ status: 'cancelled' });
    expect(await getExecution(t.db, returned)).toMatchObject({ status: 'pending', attempt: 0, leaseToken: null });
  });
});

describe('claims', () => {
  /** A no-op task and a worker that never polls: every claim it sends is one a wake-up asked for. */
  async function countingWorker(name: string, options: Partial<WorkerOptions> = {}) {
    const claims: Array<{ room: number; took: number }> = [];
    const task = defineTask({ name, run: async () => null });
    const w = await startWorker(t, [task as never], { pollIntervalMs: 3_600_000, observer: { claim: (room, took) => claims.push({ room, took }) }, ...options });
    // The claim sent at start, when the worker begins to listen.
    await waitUntil(() => (claims.length > 0 ? true : undefined), 'the first claim');
    return { w, claims };
  }

  const completed = (id: string) => waitUntil(async () => ((await getExecution(t.db, id))?.status === 'completed' ? true : undefined), 'the execution to complete');

  test('an idle worker sends one claim per execution scheduled one at a time, none after a handler returns or a completion', async () => {
    const { w, claims } = await countingWorker('claims-idle');
    try {
      const before = claims.length;
      for (let i = 0; i < 5; i++) await completed(await schedule('claims-idle', 1).then(([id]) => id));
      // Room to notice a claim sent after the last completion.
      await new Promise((r) => setTimeout(r, 200));
      expect(claims.slice(before)).toEqual(Array.from({ length: 5 }, () => expect.objectContaining({ took: 1 })));
    } finally {
      await w.stop();
    }
  });

  test('a freed slot claims again at once while due executions may remain', async () => {
    const { w, claims } = await countingWorker('claims-backlog', { concurrency: 1, prefetch: 0 });
    try {
      // One statement, one notification: the rest is found only because each full claim means more may be due.
      const ids = await schedule('claims-backlog', 3);
      for (const id of ids) await completed(id);
      expect(claims.filter((c) => c.took === 1)).toHaveLength(3);
    } finally {
      await w.stop();
    }
  });

  test('a worker that found nothing due still claims, at its next poll, what comes due without a notification', async () => {
    const { w } = await countingWorker('claims-later', { pollIntervalMs: 300 });
    try {
      await completed((await schedule('claims-later', 1))[0]);
      // Due in a moment: the insert does not notify, and the last claim found the queue empty.
      const [{ execution }] = await insertExecutions(t.db, [{ task: 'claims-later', data: { i: 1 }, startAt: new Date(Date.now() + 200) }]);
      await completed(execution.id);
    } finally {
      await w.stop();
    }
  });

  test('a handler may start before its claim commits, but a claim that fails to commit writes nothing and aborts it', async () => {
    // A deferred constraint trigger fails the COMMIT of any claim of an execution marked failCommit.
    await t.db.raw(`
      CREATE FUNCTION fail_claim_commit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.status = 'running' AND NEW.data->>'failCommit' = 'yes' THEN RAISE EXCEPTION 'commit refused for the test'; END IF;
        RETURN NEW;
      END $$;
      CREATE CONSTRAINT TRIGGER fail_commit AFTER UPDATE ON stepwise.executions DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW EXECUTE FUNCTION fail_claim_commit();`);
    const aborted: unknown[] = [];
    let stepRuns = 0;
    const task = defineTask({
      name: 'claim-not-committed',
      data: Type.Object({ failCommit: Type.String() }),
      async run(ctx) {
        ctx.signal.addEventListener('abort', () => aborted.push(ctx.signal.reason));
        await ctx.step('s', () => (stepRuns += 1));
        return 'done';
      },
    });
    const [{ execution }] = await insertExecutions(t.db, [{ task: 'claim-not-committed', data: { failCommit: 'yes' } }]);
    const w = await startWorker(t, [task as never], { concurrency: 1, prefetch: 0 });
    try {
      await waitUntil(() => (aborted.length > 0 ? true : undefined), 'the handler to be aborted');
      expect(stepRuns).toBeGreaterThan(0); // it started: the step's function ran before the commit failed
      expect((aborted[0] as Error).name).toBe('LeaseLostError');
      const steps = await queryRows<{ n: number }>(t.db, 'SELECT count(*)::int AS n FROM stepwise.steps WHERE execution_id = ?', [execution.id]);
      expect(steps[0].n).toBe(0);
      expect(await getExecution(t.db, execution.id)).toMatchObject({ status: 'pending', attempt: 0, leaseToken: null, output: null });
      await t.db.raw('DROP TRIGGER fail_commit ON stepwise.executions');
      const done = await waitUntil(async () => {
        const e = await getExecution(t.db, execution.id);
        return e?.status === 'completed' ? e : undefined;
      }, 'the execution to complete once claims commit');
      expect(done).toMatchObject({ output: 'done', attempt: 1 });
    } finally {
      await w.stop();
      await t.db.raw('DROP TRIGGER IF EXISTS fail_commit ON stepwise.executions; DROP FUNCTION fail_claim_commit()');
    }
  });
});
