// Workers count their claim statements by result and the executions they claimed: with both, an
// operator (and `make scale`) sees executions per claim and how often claims come back empty.
import { Registry } from 'prom-client';
import { defineTask } from '../../src/index';
import { observeWorker } from '../../src/worker-metrics';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

test('claims are counted full, partial or empty, and every claimed execution once', async () => {
  const name = uniqueTask('counted');
  await registerTask(api.db, name);
  const ids = await Promise.all(Array.from({ length: 10 }, async () => (await api.client.schedule(name)).execution_id));
  const registry = new Registry();
  const worker = await startWorker(api.t, [defineTask({ name, run: async () => null })], { concurrency: 4, prefetch: 0, pollIntervalMs: 50, observer: observeWorker(registry) });
  try {
    for (const id of ids) expect((await api.client.wait(id, { timeoutSeconds: 10 })).status).toBe('completed');
    const value = async (metric: string, result?: string) =>
      ((await registry.getSingleMetric(metric)?.get())?.values ?? []).filter((v) => result === undefined || v.labels.result === result).reduce((n, v) => n + v.value, 0);
    // Idle now: the next poll's claim finds nothing.
    await waitUntil(async () => (await value('stepwise_claims_total', 'empty')) > 0, 'an empty claim');
    expect(await value('stepwise_claimed_executions_total')).toBe(10);
    // Ten due for four slots: the first claim took all the room it asked for.
    expect(await value('stepwise_claims_total', 'full')).toBeGreaterThan(0);
  } finally {
    await worker.stop();
  }
});
