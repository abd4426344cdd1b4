// Concurrency: the outcomes that must hold however requests interleave.
import '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { completeAs, createExecutionIn, registerTask, uniqueTask } from '../helpers/simulated-worker';
import { queryRows } from '../../src/store/db';

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
        ['first', 'second'].map((who) => api.call('POST', `/api/v1/executions/${e.id}/events/approval`, { headers: JSON_HEADERS, body: JSON.stringify({ who }) })),
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
});
