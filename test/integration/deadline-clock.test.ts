// Durable deadlines are read on the database's clock from the moment a claim answered, not from the
// moment a handler starts: an execution that waited in the worker's prefetch buffer must still sleep
// its whole duration.
import { defineTask } from '../../src/index';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { startWorker } from '../helpers/worker';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

test('a sleep started after a wait in the prefetch buffer lasts its whole duration', async () => {
  const name = uniqueTask('sleeper');
  const task = defineTask({
    name,
    async run(ctx) {
      // Holds the worker's only slot a while, so the executions claimed with it wait in the buffer.
      await ctx.step('busy', () => new Promise((resolve) => setTimeout(resolve, 300)));
      const before = await ctx.step('before', () => Date.now());
      await ctx.sleep('nap', 500);
      const after = await ctx.step('after', () => Date.now());
      return after - before;
    },
  });
  // Scheduled before the worker starts, so that its first claim takes all three at once.
  await registerTask(api.db, name);
  const ids = await Promise.all([1, 2, 3].map(async () => (await api.client.schedule(name)).execution_id));
  const worker = await startWorker(api.t, [task], { concurrency: 1, prefetch: 4, prefetchHoldMs: 10_000, pollIntervalMs: 50 });
  try {
    for (const id of ids) {
      const done = await api.client.wait(id, { timeoutSeconds: 20 });
      expect(done.status).toBe('completed');
      expect(done.output).toBeGreaterThanOrEqual(490);
    }
  } finally {
    await worker.stop();
  }
});
