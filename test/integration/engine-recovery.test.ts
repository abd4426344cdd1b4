import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defineTask, Type } from '../../src/index';
import { getExecution, insertExecutions } from '../../src/store/executions';
import { claimExecutions } from '../../src/store/transitions/claim';
import { completeExecutions } from '../../src/store/transitions/complete';
import { failExecution } from '../../src/store/transitions/fail';
import { loadSteps, recordStepResult } from '../../src/store/steps';
import { suspendExecution } from '../../src/store/transitions/suspend';
import { queryRows } from '../../src/store/db';
import type { Worker } from '../../src/engine/worker';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';
import { spawnTsx } from '../helpers/processes';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

async function schedule(task: string, data: unknown): Promise<string> {
  const [r] = await insertExecutions(t.db, [{ task, data }]);
  return r.execution.id;
}

async function expireLease(id: string): Promise<void> {
  await t.db.raw(`UPDATE stepwise.executions SET due_at = now() - interval '1 second' WHERE id = ?`, [id]);
}

describe('crash recovery', () => {
  test('a worker SIGKILLed mid-step is taken over after its lease expires; completed steps never run again', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sw-crash-'));
    const sideEffects = path.join(dir, 'side-effects.log');
    const env = { DATABASE_URL: t.url, SIDE_EFFECT_LOG: sideEffects, STEPWISE_LEASE_MS: '1500' };
    const first = await spawnTsx('test/fixtures/worker-process.ts', ['test/fixtures/crash-tasks.ts'], { ...env, HANG_IN_STEP_TWO: '1' });
    const id = await schedule('crashy', { key: 'k' });
    await waitUntil(() => existsSync(sideEffects) && readFileSync(sideEffects, 'utf8').includes('k:two-start'), 'step two to start');
    first.child.kill('SIGKILL');
    await first.exited;
    const second = await spawnTsx('test/fixtures/worker-process.ts', ['test/fixtures/crash-tasks.ts'], env);
    try {
      const done = await waitUntil(async () => {
        const e = await getExecution(t.db, id);
        return e?.status === 'completed' ? e : undefined;
      }, 'takeover to complete');
      const lines = readFileSync(sideEffects, 'utf8').trim().split('\n');
      const count = (l: string) => lines.filter((x) => x === l).length;
      expect(count('k:one')).toBe(1); // completed before the crash: never again
      expect(count('k:two-start')).toBe(2); // in flight at the crash: run again (at least once)
      expect(count('k:two-end')).toBe(1);
      expect(count('k:three')).toBe(1);
      expect(done.attempt).toBe(2);
      expect((done.output as { pid: number }).pid).toBe(second.child.pid);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  });
});

describe('fencing', () => {
  test('a worker whose lease expired and was taken over can write no step, output or status', async () => {
    const id = await schedule('fenced', null);
    const [stale] = await claimExecutions(t.db, ['fenced'], 1, 30000);
    await expireLease(id);
    const [fresh] = await claimExecutions(t.db, ['fenced'], 1, 30000);
    expect(fresh.previousStatus).toBe('running');
    expect(fresh.execution.leaseToken).not.toBe(stale.execution.leaseToken);
    const staleLease = { id, token: stale.execution.leaseToken as string };
    expect(await recordStepResult(t.db, staleLease, 0, 'x', 1)).toBe(false);
    expect(await suspendExecution(t.db, staleLease, [{ seq: 0, name: 'nap', kind: 'sleep', wakeAt: new Date(Date.now() + 1000) }], null, 'nap')).toBeUndefined();
    expect(await failExecution(t.db, staleLease, { type: 'Error', message: 'late', retryable: false }, null)).toBe(false);
    expect((await completeExecutions(t.db, [{ ...staleLease, output: 'late' }])).size).toBe(0);
    const e = await getExecution(t.db, id);
    expect(e).toMatchObject({ status: 'running', stepsCompleted: 0, output: null, leaseToken: fresh.execution.leaseToken });
    expect(await queryRows(t.db, 'SELECT * FROM stepwise.steps WHERE execution_id = ?', [id])).toEqual([]);
  });

  test('an engine worker that lost its lease mid-step has its signal aborted and its result discarded', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let aborted = false;
    let runs = 0;
    const slow = defineTask({
      name: 'slow-fenced',
      async run(ctx) {
        runs += 1;
        const mine = runs;
        await ctx.step('work', async () => {
          if (mine === 1) {
            ctx.signal.addEventListener('abort', () => (aborted = true));
            await released;
          }
          return mine;
        });
        return mine;
      },
    });
    const w1 = await startWorker(t, [slow as never], { leaseMs: 600 });
    const id = await schedule('slow-fenced', null);
    try {
      await waitUntil(() => runs === 1, 'first run');
      // Simulate a long GC pause: the lease lapses and a second worker takes over.
      await t.db.raw(`UPDATE stepwise.executions SET lease_token = gen_random_uuid(), due_at = now() - interval '1 second' WHERE id = ?`, [id]);
      const w2 = await startWorker(t, [slow as never]);
      try {
        const done = await waitUntil(async () => {
          const e = await getExecution(t.db, id);
          return e?.status === 'completed' ? e : undefined;
        }, 'takeover to complete');
        expect(done.output).toBe(2);
        // The first worker's next lease renewal finds the lease gone and aborts its signal; it gives
        // the slot back at once, while the handler, still in its step, runs on detached.
        await waitUntil(() => aborted, 'first worker to see its lease lost');
        await waitUntil(() => w1.busy === 0, 'first worker to let go before its handler returns');
        release();
        // What the detached handler returns is never recorded.
        await new Promise((r) => setImmediate(r));
        expect((await getExecution(t.db, id))?.output).toBe(2);
        expect((await loadSteps(t.db, id)).map((s) => s.result)).toEqual([2]);
      } finally {
        await w2.stop();
      }
    } finally {
      release();
      await w1.stop();
    }
  });
});

describe('concurrency', () => {
  test('two workers never run the same execution at the same time, and each runs once', async () => {
    const running = new Set<string>();
    const ran = new Map<string, number>();
    let overlaps = 0;
    const task = defineTask({
      name: 'count-me',
      data: Type.Object({ i: Type.Integer() }),
      async run(ctx) {
        if (running.has(ctx.executionId)) overlaps += 1;
        running.add(ctx.executionId);
        ran.set(ctx.executionId, (ran.get(ctx.executionId) ?? 0) + 1);
        await new Promise((r) => setImmediate(r));
        running.delete(ctx.executionId);
        return ctx.executionId;
      },
    });
    const w1 = await startWorker(t, [task as never], { concurrency: 8 });
    const w2 = await startWorker(t, [task as never], { concurrency: 8 });
    try {
      await insertExecutions(t.db, Array.from({ length: 300 }, (_, i) => ({ task: 'count-me', data: { i } })));
      await waitUntil(async () => {
        const [{ n }] = await queryRows<{ n: number }>(t.db, `SELECT count(*)::int AS n FROM stepwise.executions WHERE task = 'count-me' AND status = 'completed'`);
        return n === 300;
      }, '300 completions');
      expect(overlaps).toBe(0);
      expect(ran.size).toBe(300);
      expect([...ran.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await Promise.all([w1.stop(), w2.stop()]);
    }
  });
});

describe('graceful shutdown', () => {
  test('stop() lets handlers finish within the grace period, then releases the rest for another worker', async () => {
    let finishQuick!: () => void;
    const quickGate = new Promise<void>((r) => (finishQuick = r));
    const task = defineTask({
      name: 'shutdown-me',
      data: Type.Object({ hang: Type.Boolean() }),
      async run(ctx, data) {
        await ctx.step('s', async () => {
          if (data.hang && ctx.attempt === 1) await new Promise((r) => ctx.signal.addEventListener('abort', r));
          else if (!data.hang) await quickGate;
          return 1;
        });
        return data.hang ? 'hung' : 'quick';
      },
    });
    const w1 = await startWorker(t, [task as never], { shutdownGraceMs: 300 });
    const quick = await schedule('shutdown-me', { hang: false });
    const hung = await schedule('shutdown-me', { hang: true });
    await waitUntil(() => w1.busy === 2, 'both running');
    const stopping = w1.stop();
    finishQuick();
    await stopping;
    expect((await getExecution(t.db, quick))?.status).toBe('completed');
    const released = await getExecution(t.db, hung);
    expect(released).toMatchObject({ status: 'pending', leaseToken: null, currentStep: null });
    const w2 = await startWorker(t, [task as never]);
    try {
      const e = await waitUntil(async () => {
        const x = await getExecution(t.db, hung);
        return x?.status === 'completed' ? x : undefined;
      }, 'released execution to complete elsewhere');
      expect(e.output).toBe('hung');
      expect(e.attempt).toBe(2);
    } finally {
      await w2.stop();
    }
  });
});
