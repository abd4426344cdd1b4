import { createStepwiseClient } from '../../src/client';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/logger';
import { EXAMPLE_TASKS_FILE, startStepwise, type Running } from '../../src/main';
import { queryRows } from '../../src/store/db';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';
import { WebhookReceiver } from '../helpers/webhook-receiver';

// Every poll is an hour away: within the test's time, only notifications move anything.
const HOUR = 3_600_000;

describe('one process, one LISTEN connection', () => {
  let t: TestDatabase;
  let running: Running;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    t = await createTestDatabase();
    receiver = await new WebhookReceiver().start();
    const config = loadConfig({
      env: {},
      overrides: {
        databaseUrl: t.url,
        port: 0,
        'worker.pollIntervalMs': HOUR,
        'webhooks.pollIntervalMs': HOUR,
        'webhooks.allowPrivateTargets': true,
        'http.waitPollIntervalMs': HOUR,
      },
    });
    running = await startStepwise({ config, api: true, tasksFile: EXAMPLE_TASKS_FILE, migrate: true, log: createLogger({ level: 'silent' }) });
  });

  afterAll(async () => {
    await running?.stop();
    await receiver?.close();
    await t?.drop();
  });

  test('the API server, the worker and the webhook deliverer all hear their notifications on it', async () => {
    const listeners = await queryRows<{ n: number }>(t.db, "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'stepwise-listener'");
    expect(listeners).toEqual([{ n: 1 }]);

    const client = createStepwiseClient({ baseUrl: running.url as string });
    const hook = await client.createWebhook(receiver.url('/done'), ['execution.completed'], { tasks: ['order-approval'] });
    receiver.setSecret('/done', hook.secret);
    // The worker claims on `stepwise_work`, the long-poll answers on `stepwise_changed`, the
    // delivery goes out on `stepwise_webhooks`.
    const { execution_id: id } = await client.schedule('order-approval', { orderId: 'A-1', amountCents: 100 });
    await waitUntil(async () => (await client.get(id)).status === 'waiting');
    await client.sendEvent(id, 'approval', { approved: true });
    const done = await client.wait(id, { timeoutSeconds: 60 });
    expect(done).toMatchObject({ status: 'completed', output: { approved: true } });
    await waitUntil(() => receiver.received.length > 0);
    expect(receiver.received[0]).toMatchObject({ path: '/done', verified: true, payload: { type: 'execution.completed', data: { execution_id: id } } });
  }, 30_000);
});
