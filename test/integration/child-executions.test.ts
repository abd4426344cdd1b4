// Child executions: ctx.invoke (start a child and wait for it) and ctx.spawn (start one and go on).
import { newExecutionId } from '../../src/domain/ids';
import { ChildExecutionError, ChildTimeoutError, defineTask, Type } from '../../src/index';
import { startChild } from '../../src/store/children';
import { queryRows } from '../../src/store/db';
import { cancelExecution } from '../../src/store/transitions/cancel';
import { completeExecutions } from '../../src/store/transitions/complete';
import { failExecution } from '../../src/store/transitions/fail';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { uniqueTask } from '../helpers/simulated-worker';
import { startWorker } from '../helpers/worker';
import { waitUntil } from '../helpers/wait-until';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const newId = () => newExecutionId();

const childrenOf = async (parent: string) =>
  queryRows<{ id: string; task: string; status: string; idempotency_key: string }>(
    api.db,
    'SELECT id, task, status, idempotency_key FROM stepwise.executions WHERE parent_id = ? ORDER BY created_at, id',
    [parent],
  );

describe('ctx.invoke', () => {
  test('runs the child, waits for it without holding a slot, and returns its typed output', async () => {
    const double = defineTask({
      name: uniqueTask('double'),
      data: Type.Object({ n: Type.Integer() }),
      async run(_ctx, data) {
        return { doubled: data.n * 2 };
      },
    });
    let parentRuns = 0;
    const parent = defineTask({
      name: uniqueTask('parent'),
      async run(ctx) {
        parentRuns += 1;
        const a = await ctx.invoke('first', double, { n: 2 });
        const b = await ctx.invoke('second', double, { n: a.doubled });
        return b.doubled;
      },
    });
    // One slot: the parent must give it up while it waits, or its child could never run.
    const worker = await startWorker(api.t, [double, parent] as never, { concurrency: 1 });
    try {
      const { execution_id } = await api.client.schedule(parent.name, {});
      const done = await api.client.wait(execution_id, { deadlineMs: 15_000 });
      expect(done).toMatchObject({ status: 'completed', output: 8, steps_completed: 2, parent_execution_id: null });
      // Started once: this worker kept it while it waited, and resumed it in place after each child.
      expect(parentRuns).toBe(1);
      const children = await childrenOf(execution_id);
      expect(children.map((c) => [c.task, c.status, c.idempotency_key])).toEqual([
        [double.name, 'completed', `child:${execution_id}:0`],
        [double.name, 'completed', `child:${execution_id}:1`],
      ]);
      const child = await api.client.get(children[0].id);
      expect(child).toMatchObject({ parent_execution_id: execution_id, data: { n: 2 }, output: { doubled: 4 } });
      const steps = await api.client.listSteps(execution_id);
      expect(steps.map((s) => [s.kind, s.name, s.status])).toEqual([
        ['child', 'first', 'completed'],
        ['child', 'second', 'completed'],
      ]);
      expect(steps[0].result).toEqual({ execution_id: children[0].id, status: 'completed', output: { doubled: 4 }, error: null });
      // The list filter finds them, oldest first.
      const listed = await api.client.list({ parent_execution_id: execution_id, order: 'asc' });
      expect(listed.executions.map((i) => i.execution_id)).toEqual(children.map((c) => c.id));
      expect(listed.total).toBe(2);
    } finally {
      await worker.stop();
    }
  });

  test('a failed child throws ChildExecutionError, which the parent may catch; uncaught, it fails the parent', async () => {
    const failing = defineTask({
      name: uniqueTask('failing'),
      retry: { maxAttempts: 1 },
      async run() {
        throw new Error('card declined');
      },
    });
    const catching = defineTask({
      name: uniqueTask('catching'),
      async run(ctx) {
        try {
          await ctx.invoke('charge', failing, null);
          return 'charged';
        } catch (err) {
          if (!(err instanceof ChildExecutionError)) throw err;
          return { status: err.status, message: err.error?.message, type: err.error?.type, child: err.executionId };
        }
      },
    });
    const uncaught = defineTask({
      name: uniqueTask('uncaught'),
      retry: { maxAttempts: 1 },
      async run(ctx) {
        return ctx.invoke('charge', failing.name);
      },
    });
    const worker = await startWorker(api.t, [failing, catching, uncaught] as never);
    try {
      const caught = await api.client.schedule(catching.name, {});
      const done = await api.client.wait(caught.execution_id, { deadlineMs: 15_000 });
      const [child] = await childrenOf(caught.execution_id);
      expect(done.output).toEqual({ status: 'failed', message: 'card declined', type: 'Error', child: child.id });

      const plain = await api.client.schedule(uncaught.name, {});
      const failed = await api.client.wait(plain.execution_id, { deadlineMs: 15_000 });
      expect(failed.status).toBe('failed');
      expect(failed.error).toMatchObject({ type: 'ChildExecutionError', retryable: false });
      expect(failed.error?.message).toMatch(/^child execution [0-9a-f-]{36} failed: card declined$/);
    } finally {
      await worker.stop();
    }
  });

  test('a fan-out (Promise.all of invokes) runs the children at once and resumes the parent with every output', async () => {
    const square = defineTask({
      name: uniqueTask('square'),
      async run(_ctx, data) {
        await new Promise((r) => setTimeout(r, 20));
        return (data as number) ** 2;
      },
    });
    let parentRuns = 0;
    const fan = defineTask({
      name: uniqueTask('fan'),
      async run(ctx) {
        parentRuns += 1;
        const squares = await Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map((n) => ctx.invoke(`square-${n}`, square.name, n)));
        return squares;
      },
    });
    const worker = await startWorker(api.t, [square, fan] as never, { concurrency: 16 });
    try {
      const { execution_id } = await api.client.schedule(fan.name, {});
      const done = await api.client.wait(execution_id, { deadlineMs: 15_000 });
      expect(done).toMatchObject({ status: 'completed', output: [1, 4, 9, 16, 25, 36, 49, 64], steps_completed: 8 });
      expect((await childrenOf(execution_id)).length).toBe(8);
      // Woken only by the child it waited for: at most once per child, plus the first run.
      expect(parentRuns).toBeLessThanOrEqual(9);
    } finally {
      await worker.stop();
    }
  });

  test('a replay after a crash finds the same child, never a second one', async () => {
    const child = defineTask({ name: uniqueTask('child'), async run() {
      return 'ok';
    } });
    let crashed = false;
    const parent = defineTask({
      name: uniqueTask('crashy'),
      retry: { maxAttempts: 3, initialDelay: 10 },
      async run(ctx) {
        const id = await ctx.spawn('background', child, null);
        const out = await ctx.invoke('foreground', child.name, null);
        // The first attempt dies once both children have run; the retry replays them.
        if (!crashed) {
          crashed = true;
          throw new Error('crash after the children ran');
        }
        return { id, out };
      },
    });
    const worker = await startWorker(api.t, [child, parent] as never);
    try {
      const { execution_id } = await api.client.schedule(parent.name, {});
      const done = await api.client.wait(execution_id, { deadlineMs: 15_000 });
      const children = await childrenOf(execution_id);
      expect(children.length).toBe(2);
      expect(done).toMatchObject({ status: 'completed', output: { id: children[0].id, out: 'ok' }, attempt: 2 });
    } finally {
      await worker.stop();
    }
  });

  test("a child takes its parent's priority unless given one; a bad one fails the parent", async () => {
    const child = defineTask({ name: uniqueTask('prio-child'), async run() {
      return null;
    } });
    const parent = defineTask({ name: uniqueTask('prio-parent'), async run(ctx) {
      await ctx.spawn('inherits', child, null);
      await ctx.spawn('own', child, null, { priority: -3 });
      return null;
    } });
    const badPriority = defineTask({ name: uniqueTask('prio-bad'), async run(ctx) {
      return ctx.spawn('bad', child, null, { priority: 1.5 });
    } });
    const worker = await startWorker(api.t, [child, parent, badPriority] as never, { concurrency: 4 });
    try {
      const { execution_id: id } = await api.client.schedule(parent.name, {}, { priority: 7 });
      expect(await api.client.wait(id, { deadlineMs: 15_000 })).toMatchObject({ status: 'completed' });
      const children = await queryRows<{ key: string; priority: number }>(api.db, 'SELECT idempotency_key AS key, priority FROM stepwise.executions WHERE parent_id = ? ORDER BY created_at', [id]);
      expect(children.map((c) => c.priority)).toEqual([7, -3]);
      const { execution_id: bad } = await api.client.schedule(badPriority.name, {});
      const failed = await api.client.wait(bad, { deadlineMs: 15_000 });
      expect(failed.error?.message).toContain('child "bad": priority must be a whole number from -1,000,000 to 1,000,000, not 1.5');
    } finally {
      await worker.stop();
    }
  });

  test('a child that finished before its parent suspended is not waited for', async () => {
    // The child finishes in the window between its insert and the parent's suspension; the parent
    // must see it finished instead of waiting for a wake-up that already happened.
    const child = defineTask({ name: uniqueTask('quick'), async run() {
      return 'quick';
    } });
    const parent = defineTask({ name: uniqueTask('slow-to-wait'), async run(ctx) {
      return ctx.invoke('q', child, null);
    } });
    const worker = await startWorker(api.t, [child, parent] as never, { concurrency: 4 });
    try {
      const runs = await Promise.all(Array.from({ length: 20 }, () => api.client.schedule(parent.name, {})));
      const done = await Promise.all(runs.map((r) => api.client.wait(r.execution_id, { deadlineMs: 15_000 })));
      expect(done.map((d) => d.output)).toEqual(Array(20).fill('quick'));
    } finally {
      await worker.stop();
    }
  });

  test('the child trigger and the suspension take the same lock: a child finishing meanwhile wakes the parent', async () => {
    // Drive the race by hand: a parent suspended on its child, and the child finished by another
    // transaction while the suspension's lock is held.
    const childTask = uniqueTask('hand-child');
    const parentTask = uniqueTask('hand-parent');
    const [parentRow] = await queryRows<{ id: string }>(
      api.db,
      `INSERT INTO stepwise.executions (id, task, status, lease_token, due_at) VALUES (gen_random_uuid(), ?, 'running', gen_random_uuid(), now() + interval '1 minute') RETURNING id`,
      [parentTask],
    );
    const [childRow] = await queryRows<{ id: string }>(
      api.db,
      `INSERT INTO stepwise.executions (id, task, status, parent_id, lease_token, due_at) VALUES (gen_random_uuid(), ?, 'running', ?, gen_random_uuid(), now() + interval '1 minute') RETURNING id`,
      [childTask, parentRow.id],
    );
    await queryRows(api.db, `INSERT INTO stepwise.steps (execution_id, seq, name, kind, result) VALUES (?, 0, 'c', 'child', jsonb_build_object('execution_id', ?::text))`, [parentRow.id, childRow.id]);
    // The parent suspends (as suspendForChild's second statement would) while holding its row lock ...
    const trx = await api.db.transaction({ isolationLevel: 'read committed' });
    await trx.raw(`SELECT 1 FROM stepwise.executions WHERE id = ? FOR UPDATE`, [parentRow.id]);
    await trx.raw(`UPDATE stepwise.executions SET status = 'waiting', lease_token = NULL, current_step = 'c', due_at = NULL WHERE id = ?`, [parentRow.id]);
    // ... the child finishes meanwhile: its trigger waits for the parent's lock ...
    const finishing = queryRows(api.db, `UPDATE stepwise.executions SET status = 'completed', output = '"done"', completed_at = now() WHERE id = ?`, [childRow.id]);
    await new Promise((r) => setTimeout(r, 100));
    await trx.commit();
    await finishing;
    // ... and then sees the suspension: the step is complete and the parent due.
    const [parent] = await queryRows<{ status: string; due: boolean; steps_completed: number }>(
      api.db,
      'SELECT status, due_at <= now() AS due, steps_completed FROM stepwise.executions WHERE id = ?',
      [parentRow.id],
    );
    expect(parent).toEqual({ status: 'waiting', due: true, steps_completed: 1 });
    const [step] = await queryRows<{ completed: boolean; result: unknown }>(api.db, 'SELECT completed, result FROM stepwise.steps WHERE execution_id = ?', [parentRow.id]);
    expect(step).toEqual({ completed: true, result: { execution_id: childRow.id, status: 'completed', output: 'done', error: null } });
  });

  test('ten children started at once by one parent take turns on its row instead of deadlocking', async () => {
    const [parentRow] = await queryRows<{ id: string; lease_token: string }>(
      api.db,
      `INSERT INTO stepwise.executions (id, task, status, lease_token, due_at) VALUES (gen_random_uuid(), ?, 'running', gen_random_uuid(), now() + interval '1 minute') RETURNING id, lease_token`,
      [uniqueTask('many-spawns')],
    );
    const lease = { id: parentRow.id, token: parentRow.lease_token };
    const task = uniqueTask('spawned');
    const ids = await Promise.all(
      Array.from({ length: 10 }, (_, seq) => startChild(api.db, lease, { id: newId(), seq, name: `s${seq}`, task, data: seq, detached: seq % 2 === 0 })),
    );
    expect(new Set(ids).size).toBe(10);
    const [parent] = await queryRows<{ steps_completed: number }>(api.db, 'SELECT steps_completed FROM stepwise.executions WHERE id = ?', [parentRow.id]);
    expect(parent.steps_completed).toBe(5);
  });

  test('a cancel and the statements that finish children all lock parents first: none deadlocks with another', async () => {
    // Parents P < Z by id, both waiting on children; C (of P) and C2 (of Z) run, as does D (of P).
    const [P, Z, C, C2, D] = [newId(), newId(), newId(), newId(), newId()];
    const [p, z] = [P, Z].sort();
    await queryRows(api.db, `INSERT INTO stepwise.executions (id, task, status) VALUES (?, 'cancel-p', 'waiting'), (?, 'cancel-z', 'waiting')`, [p, z]);
    const children = await queryRows<{ id: string; lease_token: string }>(
      api.db,
      `INSERT INTO stepwise.executions (id, task, status, parent_id, lease_token, due_at)
       SELECT c.id, 'finishing-child', 'running', c.parent, gen_random_uuid(), now() + interval '1 minute'
         FROM unnest(?::uuid[], ?::uuid[]) AS c(id, parent) RETURNING id, lease_token`,
      [[C, C2, D], [p, z, p]],
    );
    const lease = (id: string) => ({ id, token: children.find((c) => c.id === id)?.lease_token as string });
    // Something holds Z (a suspension, say): a batch finishing C and C2 takes P, then waits for Z ...
    const holdZ = await api.db.transaction({ isolationLevel: 'read committed' });
    await holdZ.raw('SELECT 1 FROM stepwise.executions WHERE id = ? FOR UPDATE', [z]);
    const batch = completeExecutions(api.db, [
      { ...lease(C), output: 1, parentId: p },
      { ...lease(C2), output: 2, parentId: z },
    ]);
    await new Promise((r) => setTimeout(r, 100));
    // ... D's final failure waits for P too, and so does a cancel of P, which would lock C first if
    // it went child before parent.
    const failing = failExecution(api.db, lease(D), { type: 'Error', message: 'no', retryable: false }, null, p);
    await new Promise((r) => setTimeout(r, 50));
    const cancelling = cancelExecution(api.db, p);
    await new Promise((r) => setTimeout(r, 100));
    await holdZ.commit();
    expect(await batch).toEqual(new Set([C, C2]));
    expect(await failing).toBe(true);
    expect((await cancelling).kind).toBe('cancelled');
    const rows = await queryRows<{ id: string; status: string }>(api.db, 'SELECT id, status FROM stepwise.executions WHERE id = ANY(?::uuid[])', [[C, C2, D]]);
    expect(Object.fromEntries(rows.map((r) => [r.id, r.status]))).toEqual({ [C]: 'completed', [C2]: 'completed', [D]: 'failed' });
  });

  test('two batches finishing children of the same two parents, in opposite orders, do not deadlock', async () => {
    const insert = (sql: string, bindings: unknown[]) => queryRows<{ id: string; lease_token: string }>(api.db, sql, bindings);
    for (let round = 0; round < 30; round++) {
      const parents = await insert(
        `INSERT INTO stepwise.executions (id, task, status) SELECT gen_random_uuid(), ?, 'waiting' FROM generate_series(1, 2) RETURNING id, lease_token`,
        [uniqueTask('p')],
      );
      // Child ids in ascending order, so each batch finishes (and its triggers lock parents) in id order:
      // batch A reaches parent 0 first, batch B parent 1 first.
      const ids = Array.from({ length: 4 }, () => newId()).sort();
      const children = await insert(
        `INSERT INTO stepwise.executions (id, task, status, parent_id, lease_token, due_at)
         SELECT c.id, ?, 'running', c.parent, gen_random_uuid(), now() + interval '1 minute'
           FROM unnest(?::uuid[], ?::uuid[]) AS c(id, parent) RETURNING id, lease_token`,
        [uniqueTask('c'), ids, [parents[0].id, parents[1].id, parents[1].id, parents[0].id]],
      );
      const token = new Map(children.map((c) => [c.id, c.lease_token]));
      const item = (i: number, parent: number) => ({ id: ids[i], token: token.get(ids[i]) as string, output: i, parentId: parents[parent].id });
      // A finishes children of parent 0 then 1; B, at the same time, of parent 1 then 0.
      const [a, b] = await Promise.all([completeExecutions(api.db, [item(0, 0), item(1, 1)]), completeExecutions(api.db, [item(2, 1), item(3, 0)])]);
      expect([a.size, b.size]).toEqual([2, 2]);
    }
  });

  test('an unregistered child task fails the attempt (retryable); data that fails its schema fails the parent at once', async () => {
    const typed = defineTask({ name: uniqueTask('typed'), data: Type.Object({ n: Type.Integer() }), async run() {
      return null;
    } });
    const unknownTask = uniqueTask('nobody-serves-this');
    const toUnknown = defineTask({ name: uniqueTask('to-unknown'), retry: { maxAttempts: 2, initialDelay: 10 }, async run(ctx) {
      return ctx.invoke('x', unknownTask, null);
    } });
    const badData = defineTask({ name: uniqueTask('bad-data'), retry: { maxAttempts: 3 }, async run(ctx) {
      return ctx.invoke('x', typed.name, { n: 'not a number' });
    } });
    // Infinity passes an integer schema as a JavaScript value, but is stored as null: judged as stored.
    const infinite = defineTask({ name: uniqueTask('infinite'), retry: { maxAttempts: 3 }, async run(ctx) {
      return ctx.invoke('x', typed, { n: Infinity });
    } });
    const worker = await startWorker(api.t, [typed, toUnknown, badData, infinite] as never);
    try {
      const a = await api.client.schedule(toUnknown.name, {});
      const failedA = await api.client.wait(a.execution_id, { deadlineMs: 15_000 });
      expect(failedA).toMatchObject({ status: 'failed', attempt: 2, error: { type: 'Error', message: `cannot start a child execution of task "${unknownTask}": no worker has registered it` } });
      const b = await api.client.schedule(badData.name, {});
      const failedB = await api.client.wait(b.execution_id, { deadlineMs: 15_000 });
      expect(failedB).toMatchObject({ status: 'failed', attempt: 1, error: { type: 'NonRetryableError', retryable: false } });
      expect(failedB.error?.message).toContain(`data for a child execution of task "${typed.name}" does not match its schema: /n must be integer`);
      expect(await childrenOf(a.execution_id)).toEqual([]);
      expect(await childrenOf(b.execution_id)).toEqual([]);
      const c = await api.client.schedule(infinite.name, {});
      const failedC = await api.client.wait(c.execution_id, { deadlineMs: 15_000 });
      expect(failedC).toMatchObject({ status: 'failed', attempt: 1, error: { type: 'NonRetryableError' } });
      expect(failedC.error?.message).toContain('/n must be integer');
      expect(await childrenOf(c.execution_id)).toEqual([]);
    } finally {
      await worker.stop();
    }
  });
});

describe('a child task served by another worker', () => {
  test('is checked against the schema that worker registered, and run by it', async () => {
    const remote = defineTask({ name: uniqueTask('remote'), data: Type.Object({ n: Type.Integer() }), async run(_ctx, data) {
      return data.n + 1;
    } });
    const parent = defineTask({ name: uniqueTask('local-parent'), retry: { maxAttempts: 1 }, async run(ctx, data) {
      // By name only: this worker knows nothing of the task but what the database says.
      return ctx.invoke('remote', remote.name, data);
    } });
    const serving = await startWorker(api.t, [remote] as never);
    const calling = await startWorker(api.t, [parent] as never);
    try {
      const good = await api.client.schedule(parent.name, { n: 41 });
      expect(await api.client.wait(good.execution_id, { deadlineMs: 15_000 })).toMatchObject({ status: 'completed', output: 42 });
      const bad = await api.client.schedule(parent.name, { n: 'x' });
      const failed = await api.client.wait(bad.execution_id, { deadlineMs: 15_000 });
      expect(failed.error).toMatchObject({ type: 'NonRetryableError' });
      expect(failed.error?.message).toContain(`data for a child execution of task "${remote.name}" does not match its schema: /n must be integer`);
    } finally {
      await Promise.all([serving.stop(), calling.stop()]);
    }
  });
});

describe('ctx.invoke with a timeout', () => {
  test('throws ChildTimeoutError when the child has not finished in time, and returns the output when it has', async () => {
    const gate = defineTask({ name: uniqueTask('gate'), events: { open: Type.Null() }, async run(ctx) {
      await ctx.waitForEvent('open');
      return 'opened';
    } });
    const quick = defineTask({ name: uniqueTask('in-time'), async run() {
      return 'fast';
    } });
    const parent = defineTask({ name: uniqueTask('impatient'), async run(ctx) {
      // A timeout far off: the child's finish must wake the parent, not the deadline.
      const fast = await ctx.invoke('quick', quick, null, { timeout: '1h' });
      try {
        await ctx.invoke('slow', gate, null, { timeout: 300 });
        return { fast, timedOut: false };
      } catch (err) {
        if (!(err instanceof ChildTimeoutError)) throw err;
        return { fast, timedOut: true, child: err.executionId };
      }
    } });
    const worker = await startWorker(api.t, [gate, quick, parent] as never);
    try {
      const { execution_id } = await api.client.schedule(parent.name, {});
      const done = await api.client.wait(execution_id, { deadlineMs: 15_000 });
      const children = await childrenOf(execution_id);
      expect(done).toMatchObject({ status: 'completed', output: { fast: 'fast', timedOut: true, child: children[1].id }, steps_completed: 2 });
      const steps = await api.client.listSteps(execution_id);
      expect(steps[1]).toMatchObject({ kind: 'child', status: 'completed', result: { execution_id: children[1].id, timed_out: true } });
      expect(Date.parse(steps[1].completed_at as string)).toBeGreaterThanOrEqual(Date.parse(steps[1].wake_at as string));
      // The child goes on; when it finishes, the parent's record of the timeout stays as it was.
      expect(children[1].status).toBe('waiting');
      await api.client.sendEvent(children[1].id, 'open', null);
      expect((await api.client.wait(children[1].id, { deadlineMs: 15_000 })).output).toBe('opened');
      expect((await api.client.listSteps(execution_id))[1].result).toEqual({ execution_id: children[1].id, timed_out: true });
      expect((await api.client.get(execution_id)).steps_completed).toBe(2);
    } finally {
      await worker.stop();
    }
  });
});

describe('ctx.spawn', () => {
  test('starts a child without waiting, at a later start if asked, and returns its id', async () => {
    const later = defineTask({ name: uniqueTask('later'), async run() {
      return 'ran';
    } });
    const startAt = new Date(Date.now() + 3600_000);
    const parent = defineTask({ name: uniqueTask('spawner'), async run(ctx) {
      const now = await ctx.spawn('now', later, null);
      const delayed = await ctx.spawn('delayed', later.name, { x: 1 }, { startAt });
      return [now, delayed];
    } });
    const worker = await startWorker(api.t, [later, parent] as never);
    try {
      const { execution_id } = await api.client.schedule(parent.name, {});
      const done = await api.client.wait(execution_id, { deadlineMs: 15_000 });
      const [nowId, delayedId] = done.output as string[];
      expect(done.steps_completed).toBe(2);
      expect((await api.client.wait(nowId, { deadlineMs: 15_000 })).output).toBe('ran');
      expect(await api.client.get(delayedId)).toMatchObject({ status: 'pending', start_at: startAt.toISOString(), data: { x: 1 }, parent_execution_id: execution_id });
      await api.client.cancel(delayedId);
    } finally {
      await worker.stop();
    }
  });
});

describe('cancelling a parent', () => {
  test('cancels its unfinished children and theirs, aborting running handlers; finished children stay as they are', async () => {
    let grandchildAborted = false;
    const grandchild = defineTask({ name: uniqueTask('grandchild'), async run(ctx) {
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
      grandchildAborted = true;
      return null;
    } });
    const quick = defineTask({ name: uniqueTask('quick'), async run() {
      return 'done';
    } });
    const child = defineTask({ name: uniqueTask('middle'), async run(ctx) {
      return ctx.invoke('deep', grandchild, null);
    } });
    const parent = defineTask({ name: uniqueTask('top'), async run(ctx) {
      await ctx.invoke('quick', quick, null);
      await ctx.spawn('detached', child, null);
      return ctx.invoke('waits', child, null);
    } });
    const worker = await startWorker(api.t, [grandchild, quick, child, parent] as never);
    try {
      const { execution_id } = await api.client.schedule(parent.name, {});
      // Both middles wait on a grandchild that runs until aborted.
      await waitUntil(async () => (await queryRows<{ n: number }>(api.db, `SELECT count(*)::int AS n FROM stepwise.executions WHERE task = ? AND status = 'running'`, [grandchild.name]))[0].n === 2, 'two grandchildren to run');
      expect(await api.client.cancel(execution_id)).toEqual({ execution_id, status: 'cancelled' });
      const children = await childrenOf(execution_id);
      expect(children.map((c) => [c.task, c.status])).toEqual([
        [quick.name, 'completed'],
        [child.name, 'cancelled'],
        [child.name, 'cancelled'],
      ]);
      const grandchildren = (await Promise.all(children.slice(1).map((c) => childrenOf(c.id)))).flat();
      expect(grandchildren.map((g) => g.status)).toEqual(['cancelled', 'cancelled']);
      const g = await api.client.get(grandchildren[0].id);
      expect(g.error).toEqual({ type: 'cancelled', message: `its parent execution ${children[1].id} was cancelled`, retryable: false });
      await waitUntil(() => grandchildAborted, 'the running grandchild handler to see ctx.signal abort');
    } finally {
      await worker.stop();
    }
  });
});

describe('the API', () => {
  test('refuses idempotency keys starting with child:, and filters the list by parent', async () => {
    const res = await api.call('POST', '/api/v1/executions', {
      body: JSON.stringify({ task: 'anything', data: {}, idempotency_key: 'child:x' }),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { code: 'invalid_data', details: [{ path: 'body/idempotency_key', message: 'must not start with "child:", which child executions use' }] } });
    const bad = await api.call('GET', '/api/v1/executions?parent_execution_id=nope');
    expect(bad.status).toBe(422);
    const none = await api.client.list({ parent_execution_id: '0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10' });
    expect(none).toMatchObject({ executions: [], total: 0 });
  });
});
