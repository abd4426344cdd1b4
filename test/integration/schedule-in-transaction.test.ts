// schedule(): an execution scheduled with a statement on the caller's own connection or transaction
// (node-postgres or knex), committed or rolled back with the caller's writes.
import knex from 'knex';
import pg from 'pg';
import { TaskRegistry } from '../../src/engine/registry';
import { defineTask, IdempotencyKeyConflictError, schedule, TaskNotRegisteredError, Type } from '../../src/index';
import { queryRows } from '../../src/store/db';
import { upsertTasks } from '../../src/store/tasks';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { uniqueTask } from '../helpers/simulated-worker';
import { startWorker } from '../helpers/worker';

let api: TestApi;
let pool: pg.Pool;
beforeAll(async () => {
  api = await startTestApi();
  pool = new pg.Pool({ connectionString: api.t.url, max: 4 });
  await api.db.raw('CREATE TABLE orders (id text PRIMARY KEY)');
});
afterAll(async () => {
  await pool.end();
  await api.close();
});

const ship = defineTask({
  name: uniqueTask('ship'),
  data: Type.Object({ orderId: Type.String() }),
  async run(_ctx, data) {
    return { shipped: data.orderId };
  },
});

const executionsOf = (task: string) => queryRows<{ id: string; data: unknown; status: string }>(api.db, 'SELECT id, data, status FROM stepwise.executions WHERE task = ? ORDER BY created_at', [task]);

describe('schedule() in the caller’s transaction', () => {
  test('commits with the caller’s writes, and a worker runs it', async () => {
    const client = await pool.connect();
    let scheduled;
    try {
      await client.query('BEGIN');
      await client.query("INSERT INTO orders (id) VALUES ('o-1')");
      scheduled = await schedule(client, ship, { orderId: 'o-1' });
      // Not visible outside the transaction before its commit.
      expect(await executionsOf(ship.name)).toEqual([]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(scheduled).toMatchObject({ task: ship.name, status: 'pending', created: true });
    expect(scheduled.createdAt).toBeInstanceOf(Date);
    const worker = await startWorker(api.t, [ship] as never);
    try {
      const done = await api.client.wait(scheduled.executionId, { deadlineMs: 15_000 });
      expect(done).toMatchObject({ status: 'completed', output: { shipped: 'o-1' }, data: { orderId: 'o-1' } });
    } finally {
      await worker.stop();
    }
  });

  test('a rollback leaves no execution, and no worker hears of one', async () => {
    const task = defineTask({ name: uniqueTask('rolled-back'), async run() {} });
    const client = await pool.connect();
    const listener = await pool.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => heard.push(n.payload ?? ''));
    try {
      await listener.query('LISTEN stepwise_work');
      await client.query('BEGIN');
      await client.query("INSERT INTO orders (id) VALUES ('o-2')");
      await schedule(client, task, null);
      await client.query('ROLLBACK');
      // A commit after it notifies: once heard, the rolled-back one would have been heard before.
      await schedule(pool, ship, { orderId: 'later' });
      const deadline = Date.now() + 5000;
      while (!heard.includes(ship.name) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    } finally {
      await listener.query('UNLISTEN *');
      listener.release();
      client.release();
    }
    expect(heard).toContain(ship.name);
    expect(heard).not.toContain(task.name);
    expect(await executionsOf(task.name)).toEqual([]);
    expect(await queryRows(api.db, "SELECT id FROM orders WHERE id = 'o-2'")).toEqual([]);
  });

  test('runs on a knex transaction, and its idempotency key finds the same execution', async () => {
    const task = defineTask({ name: uniqueTask('knexed'), data: Type.Object({ n: Type.Integer() }), async run() {} });
    const first = await api.db.transaction(async (trx) => {
      await trx.raw("INSERT INTO orders (id) VALUES ('o-3')");
      return schedule(trx, task, { n: 1 }, { idempotencyKey: 'order-o-3' });
    });
    const again = await schedule(api.db, task, { n: 2 }, { idempotencyKey: 'order-o-3' });
    const onPg = await schedule(pool, task, { n: 3 }, { idempotencyKey: 'order-o-3' });
    expect(first.created).toBe(true);
    expect(again).toEqual({ ...first, created: false });
    expect(onPg).toEqual({ ...first, created: false });
    expect(await executionsOf(task.name)).toEqual([{ id: first.executionId, data: { n: 1 }, status: 'pending' }]);
    // The API sees it as any other execution.
    expect(await api.client.get(first.executionId)).toMatchObject({ task: task.name, data: { n: 1 }, status: 'pending' });
  });

  test('reads its own rows past a knex instance’s postProcessResponse (a camelCase mapper)', async () => {
    const camel = (key: string) => key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    const mapped = knex({
      client: 'pg',
      connection: api.t.url,
      pool: { min: 0, max: 2 },
      postProcessResponse: (result: { rows?: Array<Record<string, unknown>> }) => {
        if (result?.rows) result.rows = result.rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [camel(k), v])));
        return result;
      },
    });
    try {
      const first = await mapped.transaction((trx) => schedule(trx, ship, { orderId: 'o-camel' }, { idempotencyKey: 'order-o-camel' }));
      const again = await schedule(mapped, ship, { orderId: 'o-camel' }, { idempotencyKey: 'order-o-camel' });
      expect(first.createdAt).toBeInstanceOf(Date);
      expect(Number.isNaN(first.createdAt.getTime())).toBe(false);
      expect(again).toEqual({ ...first, created: false });
      // The same instant the API reports.
      expect((await api.client.get(first.executionId)).created_at).toBe(first.createdAt.toISOString());
    } finally {
      await mapped.destroy();
    }
  });

  test('stamps created_at when the statement runs, not when the caller’s transaction began', async () => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ began: Date }>('SELECT now() AS began');
      await client.query('SELECT pg_sleep(0.1)');
      const scheduled = await schedule(client, ship, { orderId: 'o-late' });
      await client.query('COMMIT');
      expect(scheduled.createdAt.getTime() - rows[0].began.getTime()).toBeGreaterThanOrEqual(90);
      const [row] = await queryRows<{ due_at: Date }>(api.db, 'SELECT due_at FROM stepwise.executions WHERE id = ?', [scheduled.executionId]);
      expect(row.due_at.getTime()).toBeGreaterThanOrEqual(scheduled.createdAt.getTime());
    } finally {
      client.release();
    }
  });

  test('in REPEATABLE READ, a key committed after the snapshot is a serialization failure', async () => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await client.query('SELECT 1 FROM stepwise.executions LIMIT 1'); // takes the snapshot
      const other = await schedule(pool, ship, { orderId: 'o-rr' }, { idempotencyKey: 'order-o-rr' });
      const err = await schedule(client, ship, { orderId: 'o-rr' }, { idempotencyKey: 'order-o-rr' }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: '40001' });
      await client.query('ROLLBACK');
      // Retried in a new transaction, it finds the committed execution.
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      expect(await schedule(client, ship, { orderId: 'o-rr' }, { idempotencyKey: 'order-o-rr' })).toEqual({ ...other, created: false });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  });

  test('a key held by another task is a conflict', async () => {
    await schedule(pool, ship, { orderId: 'o-4' }, { idempotencyKey: 'shared-key' });
    const other = defineTask({ name: uniqueTask('other'), async run() {} });
    const err = await schedule(pool, other, null, { idempotencyKey: 'shared-key' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdempotencyKeyConflictError);
    expect(err).toMatchObject({ idempotencyKey: 'shared-key', existingTask: ship.name });
    expect(await executionsOf(other.name)).toEqual([]);
  });

  test('a start time keeps it pending until then', async () => {
    const startAt = new Date(Date.now() + 3_600_000);
    const scheduled = await schedule(pool, ship, { orderId: 'o-5' }, { startAt: startAt.toISOString().replace('Z', '+00:00') });
    const [row] = await queryRows<{ start_at: Date; due_at: Date }>(api.db, 'SELECT start_at, due_at FROM stepwise.executions WHERE id = ?', [scheduled.executionId]);
    expect(row.start_at.getTime()).toBe(startAt.getTime());
    expect(row.due_at.getTime()).toBe(startAt.getTime());
  });

  test('by name: the task must be registered, and data is checked against the schema recorded then', async () => {
    const billed = defineTask({ name: uniqueTask('billed'), data: Type.Object({ cents: Type.Integer({ minimum: 1 }) }), async run() {} });
    const unknown = await schedule(pool, billed.name, { cents: 5 }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(TaskNotRegisteredError);
    expect(unknown).toMatchObject({ task: billed.name, message: expect.stringContaining('is not registered') });
    // What a worker serving the task records when it starts.
    await upsertTasks(api.db, new TaskRegistry([billed] as never).toRegistrations());
    const bad = await schedule(pool, billed.name, { cents: 0 }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(TypeError);
    expect((bad as Error).message).toMatch(/does not match its schema: .*cents/);
    expect(await executionsOf(billed.name)).toEqual([]);
    const scheduled = await api.db.transaction((trx) => schedule(trx, billed.name, { cents: 5 }, { idempotencyKey: 'bill-1' }));
    expect(scheduled).toMatchObject({ task: billed.name, status: 'pending', created: true });
    expect(await executionsOf(billed.name)).toEqual([{ id: scheduled.executionId, data: { cents: 5 }, status: 'pending' }]);
    for (const name of ['', 'no spaces', 'x'.repeat(256)]) {
      await expect(schedule(pool, name, null)).rejects.toThrow(/task name/);
    }
  });

  test('by name: the recorded schema is read as text, whatever the caller’s type parsers, and judged as the API judges it', async () => {
    const named = uniqueTask('recorded');
    await api.db.raw(`INSERT INTO stepwise.tasks (name, data_schema) VALUES (?, '{"type":"object","required":["id"]}')`, [named]);
    // A caller that keeps jsonb as text.
    const raw = new pg.Pool({ connectionString: api.t.url, max: 1, types: { getTypeParser: (oid: number, format?: string) => (oid === 3802 ? (v: string) => v : pg.types.getTypeParser(oid, format as never)) } as never });
    try {
      await expect(schedule(raw, named, {})).rejects.toThrow(/does not match its schema/);
      expect((await schedule(raw, named, { id: 1 })).created).toBe(true);
    } finally {
      await raw.end();
    }
    // A `false` schema refuses everything; one that does not compile names the task.
    await api.db.raw(`UPDATE stepwise.tasks SET data_schema = 'false' WHERE name = ?`, [named]);
    await expect(schedule(pool, named, { id: 1 })).rejects.toThrow(/does not match its schema/);
    await api.db.raw(`UPDATE stepwise.tasks SET data_schema = '{"type":"nonsense"}' WHERE name = ?`, [named]);
    const err = await schedule(pool, named, { id: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TypeError);
    expect((err as Error).message).toContain(`the data schema of task "${named}" does not compile`);
    await api.db.raw(`UPDATE stepwise.tasks SET data_schema = NULL WHERE name = ?`, [named]);
    expect((await schedule(pool, named, 'anything')).created).toBe(true);
  });

  test('takes what the API takes: text with a literal backslash-u0000, a key of 255 characters beyond the BMP', async () => {
    const a = await schedule(pool, ship, { orderId: 'C:\\u0000dir' });
    const key = '😀'.repeat(255);
    const b = await schedule(pool, ship, { orderId: 'y' }, { idempotencyKey: key });
    expect((await api.client.get(a.executionId)).data).toEqual({ orderId: 'C:\\u0000dir' });
    expect(b.created).toBe(true);
  });

  test('bad input is refused before anything is written', async () => {
    const counted = defineTask({ name: uniqueTask('counted'), data: Type.Object({ n: Type.Number() }), async run() {} });
    const before = (await executionsOf(ship.name)).length;
    const cases: Array<[() => Promise<unknown>, ErrorConstructor, RegExp]> = [
      [() => schedule(pool, ship, { orderId: 7 } as never), TypeError, /does not match its schema: .*orderId/],
      [() => schedule(pool, ship, { orderId: 'a\u0000b' }), TypeError, /NUL/],
      [() => schedule(pool, ship, { orderId: 'a\ud800' }), TypeError, /cannot store/],
      [() => schedule(pool, ship, { orderId: 'x', big: 1n } as never), TypeError, /not JSON-serializable/],
      [() => schedule(pool, ship, { orderId: 'x' }, { idempotencyKey: '' }), TypeError, /1 to 255/],
      [() => schedule(pool, ship, { orderId: 'x' }, { idempotencyKey: 'k'.repeat(256) }), TypeError, /1 to 255/],
      [() => schedule(pool, ship, { orderId: 'x' }, { idempotencyKey: 'cron:x' }), TypeError, /"cron:"/],
      [() => schedule(pool, ship, { orderId: 'x' }, { idempotencyKey: 'child:x' }), TypeError, /"child:"/],
      [() => schedule(pool, ship, { orderId: 'x' }, { startAt: 'tomorrow' }), RangeError, /not an instant/],
      [() => schedule(pool, ship, { orderId: 'x' }, { startAt: '2030-01-01T10:00:00' }), RangeError, /time zone/],
      [() => schedule(pool, ship, { orderId: 'x' }, { startAt: new Date(NaN) }), RangeError, /not an instant/],
      [() => schedule(pool, { name: 'not-a-task' } as never, null), TypeError, /defineTask/],
      // Checked as stored: NaN becomes null, and toJSON() runs first.
      [() => schedule(pool, counted, { n: NaN }), TypeError, /does not match its schema/],
      [() => schedule(pool, ship, { orderId: 'x', extra: { toJSON: () => 'a\ud800' } } as never), TypeError, /cannot store/],
      // The contract's date-time: real calendar dates, a leap second only at 23:59:60 UTC.
      [() => schedule(pool, ship, { orderId: 'x' }, { startAt: '2024-02-30T00:00:00Z' }), RangeError, /not an instant/],
      [() => schedule(pool, ship, { orderId: 'x' }, { startAt: '2024-01-01T12:00:60Z' }), RangeError, /not an instant/],
    ];
    for (const [call, type, message] of cases) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(type);
      expect((err as Error).message).toMatch(message);
    }
    expect(await executionsOf(ship.name)).toHaveLength(before);
  });
});
