// Concurrency: the outcomes that must hold however requests interleave.
import '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { completeAs, createExecutionIn, registerTask, uniqueTask } from '../helpers/simulated-worker';
import { queryRows } from '../../src/store/db';
import pg from 'pg';
import { waitUntil } from '../helpers/wait-until';

let api: TestApi;
const JSON_HEADERS = { 'Content-Type': 'application/json' };
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

describe('races', () => {
  test('20 concurrent identical schedules create exactly one execution', async () => {
    for (let round = 0; round < 3; round++) {
      const task = uniqueTask('race');
      await registerTask(api.db, task);
      const body = JSON.stringify({ task, data: { round }, idempotency_key: `race-${task}` });
      const answers = await Promise.all(Array.from({ length: 20 }, () => api.call('POST', '/api/v1/executions', { headers: JSON_HEADERS, body })));
      expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
      expect(answers.filter((a) => a.status === 200)).toHaveLength(19);
      expect(new Set(answers.map((a) => (a.body as { execution_id: string }).execution_id)).size).toBe(1);
      const [{ n }] = await queryRows<{ n: number }>(api.db, 'SELECT count(*)::int AS n FROM stepwise.executions WHERE task = ?', [task]);
      expect(n).toBe(1);
    }
  });

  test('two concurrent deliveries of the same event: one 200 and one 409, and the payload of the winner is stored', async () => {
    for (let round = 0; round < 10; round++) {
      const e = await createExecutionIn(api.client, api.db, 'waiting');
      const answers = await Promise.all(
        ['first', 'second'].map((who) => api.call('POST', `/api/v1/events/${e.id}/approval`, { headers: JSON_HEADERS, body: JSON.stringify({ who }) })),
      );
      expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
      const winner = answers[0].status === 200 ? 'first' : 'second';
      const steps = await api.client.listSteps(e.id);
      expect(steps).toHaveLength(1);
      expect(steps[0].result).toEqual({ payload: { who: winner } });
    }
  });

  test('a cancel racing a completion ends in exactly one final state, and every reader agrees', async () => {
    const outcomes = { cancelled: 0, completed: 0 };
    for (let round = 0; round < 20; round++) {
      const e = await createExecutionIn(api.client, api.db, 'running');
      const [cancel, landed] = await Promise.all([api.call('POST', `/api/v1/executions/${e.id}/cancel`), completeAs(api.db, e.lease!, { round })]);
      const final = await api.client.get(e.id);
      if (cancel.status === 200) {
        expect(landed).toBe(false);
        expect(final).toMatchObject({ status: 'cancelled', output: null });
        outcomes.cancelled++;
      } else {
        expect(cancel.status).toBe(409);
        expect(cancel.body).toMatchObject({ error: { code: 'execution_not_cancellable' } });
        expect(landed).toBe(true);
        expect(final).toMatchObject({ status: 'completed', output: { round } });
        outcomes.completed++;
      }
      expect((await api.client.wait(e.id, { timeoutSeconds: 1 })).status).toBe(final.status);
    }
    expect(outcomes.cancelled + outcomes.completed).toBe(20);
  });

  test('a cancel that PostgreSQL picks as a deadlock victim is run again and answers 200, not 500', async () => {
    const target = await createExecutionIn(api.client, api.db, 'waiting');
    const other = await createExecutionIn(api.client, api.db, 'waiting');
    const [t1, t2, watcher] = [new pg.Client({ connectionString: api.t.url }), new pg.Client({ connectionString: api.t.url }), new pg.Client({ connectionString: api.t.url })];
    await Promise.all([t1.connect(), t2.connect(), watcher.connect()]);
    const touch = (c: pg.Client, id: string) => c.query('UPDATE stepwise.executions SET attempt = attempt WHERE id = $1', [id]);
    const waiters = async () => (await watcher.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")).rows[0].n as number;
    try {
      await t1.query('BEGIN');
      await touch(t1, target.id);
      // The cancel waits for t1's row lock, and holds the row's place in the queue for it.
      const cancel = api.call('POST', `/api/v1/executions/${target.id}/cancel`);
      await waitUntil(async () => (await waiters()) === 1, 'the cancel to wait for the row');
      await t2.query('BEGIN');
      await touch(t2, other.id);
      // t2 queues behind the cancel for the target; t1 then waits for t2's row: a cycle through the cancel,
      // which has waited longest, so its backend finds the deadlock and its statement is rolled back.
      const t2Blocked = touch(t2, target.id).then(() => 'done', (e: Error) => e.message);
      await waitUntil(async () => (await waiters()) === 2, 't2 to queue for the row');
      const t1Blocked = touch(t1, other.id).then(() => 'done', (e: Error) => e.message);
      // Run again, the cancel waits behind t1 and t2, whose own deadlock PostgreSQL breaks next.
      const [t1Outcome, t2Outcome] = await Promise.all([t1Blocked, t2Blocked]);
      expect([t1Outcome, t2Outcome].filter((o) => o === 'deadlock detected')).toHaveLength(1);
      await Promise.all([t1.query('ROLLBACK'), t2.query('ROLLBACK')]);
      const answer = await cancel;
      expect({ status: answer.status, body: answer.body }).toEqual({ status: 200, body: { execution_id: target.id, status: 'cancelled' } });
      expect((await api.client.get(target.id)).status).toBe('cancelled');
    } finally {
      await Promise.all([t1.end(), t2.end(), watcher.end()]);
    }
  });
});
