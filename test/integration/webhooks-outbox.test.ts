// The webhook outbox (migration 014) and its deliverer, against real PostgreSQL and a real receiver:
// which status changes queue deliveries and with what payload, that a rolled-back change queues
// none, and how deliveries are claimed, retried, failed, retaken after a crash and swept.
import { randomUUID } from 'node:crypto';
import { queryRows } from '../../src/store/db';
import { insertExecutions } from '../../src/store/executions';
import { claimDueDeliveries, deleteFinishedDeliveries, recordAttempts } from '../../src/store/webhook-deliveries';
import { createWebhook, deleteWebhook, listDeliveries, type WebhookEventType } from '../../src/store/webhooks';
import { cancelExecution } from '../../src/store/transitions/cancel';
import { claimExecutions } from '../../src/store/transitions/claim';
import { returnUnstarted } from '../../src/store/transitions/release';
import { suspendExecution } from '../../src/store/transitions/suspend';
import { Registry } from 'prom-client';
import { RetentionSweeper } from '../../src/engine/retention';
import { WebhookDeliverer } from '../../src/webhooks/deliverer';
import { observeWebhookDeliveries } from '../../src/webhooks/metrics';
import { newWebhookSecret } from '../../src/webhooks/signing';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { claimExecution, completeAs, failAs, registerTask, uniqueTask, waitForEventAs } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { WebhookReceiver } from '../helpers/webhook-receiver';
import { quietLog, startWorker } from '../helpers/worker';
import { defineTask } from '../../src/index';

const ALL: WebhookEventType[] = ['execution.completed', 'execution.failed', 'execution.cancelled', 'execution.waiting'];

let t: TestDatabase;
let receiver: WebhookReceiver;
beforeAll(async () => {
  t = await createTestDatabase();
  receiver = await new WebhookReceiver().start();
});
afterAll(async () => {
  await receiver.close();
  await t.drop();
});
afterEach(async () => {
  // Each test subscribes its own webhooks: none outlives it.
  await queryRows(t.db, 'DELETE FROM stepwise.webhooks');
  await queryRows(t.db, 'DELETE FROM stepwise.webhook_deliveries');
  receiver.respond = () => 200;
});

async function subscribe(path: string, events: WebhookEventType[] = ALL, tasks?: string[]): Promise<string> {
  const secret = newWebhookSecret();
  const webhook = await createWebhook(t.db, { id: randomUUID(), url: receiver.url(path), events, tasks, secret });
  receiver.setSecret(path, secret);
  return webhook.id;
}

interface Row {
  webhook_id: string;
  event_type: string;
  execution_id: string;
  payload: { type: string; timestamp: string; data: Record<string, unknown> };
}

async function deliveriesOf(executionId: string): Promise<Row[]> {
  return queryRows<Row>(t.db, 'SELECT webhook_id, event_type, execution_id, payload FROM stepwise.webhook_deliveries WHERE execution_id = ? ORDER BY created_at, id', [executionId]);
}

async function scheduled(task: string, extra: { idempotencyKey?: string; tags?: string[] } = {}): Promise<string> {
  await registerTask(t.db, task);
  const [{ execution }] = await insertExecutions(t.db, [{ task, data: {}, ...extra }]);
  return execution.id;
}

function deliverer(options: Partial<ConstructorParameters<typeof WebhookDeliverer>[0]> = {}): WebhookDeliverer {
  return new WebhookDeliverer({ db: t.db, databaseUrl: t.url, log: quietLog, policy: { allowPrivate: true }, pollIntervalMs: 100, retryBaseMs: 20, ...options });
}

describe('the outbox: each status change queues its deliveries in its own transaction', () => {
  test('completed, failed, cancelled and waiting each queue one delivery per matching webhook, with the execution as it was', async () => {
    const all = await subscribe('/all');
    const task = uniqueTask('outbox');

    const completed = await scheduled(task, { idempotencyKey: `k-${randomUUID()}`, tags: ['eu'] });
    await completeAs(t.db, await claimExecution(t.db, task, completed), { total: 42 });
    const failed = await scheduled(task);
    await failAs(t.db, await claimExecution(t.db, task, failed), 'card declined');
    const waiting = await scheduled(task);
    await waitForEventAs(t.db, await claimExecution(t.db, task, waiting), 'approval');
    await cancelExecution(t.db, waiting);

    const [c] = await deliveriesOf(completed);
    expect(c).toMatchObject({ webhook_id: all, event_type: 'execution.completed' });
    expect(c.payload).toEqual({
      type: 'execution.completed',
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      data: {
        execution_id: completed,
        task,
        status: 'completed',
        attempt: 1,
        current_step: null,
        idempotency_key: expect.stringMatching(/^k-/),
        tags: ['eu'],
        parent_execution_id: null,
        created_at: expect.any(String),
        started_at: expect.any(String),
        completed_at: c.payload.timestamp,
        output: { total: 42 },
        output_omitted: false,
        error: null,
      },
    });
    const [f] = await deliveriesOf(failed);
    expect(f.payload).toMatchObject({ type: 'execution.failed', data: { status: 'failed', output: null, error: { type: 'Error', message: 'card declined', retryable: false } } });
    const w = await deliveriesOf(waiting);
    expect(w.map((d) => d.event_type)).toEqual(['execution.waiting', 'execution.cancelled']);
    expect(w[0].payload.data).toMatchObject({ status: 'waiting', current_step: 'approval', error: null });
    expect(w[1].payload.data).toMatchObject({ status: 'cancelled', current_step: null, error: { type: 'cancelled' } });
  });

  test("a real worker's batched completions, each claiming the next executions in the same statement, queue one delivery per execution", async () => {
    await subscribe('/batched', ['execution.completed']);
    const task = uniqueTask('batched');
    const ids: string[] = [];
    await registerTask(t.db, task);
    for (const chunk of [0, 1, 2, 3]) {
      const scheduled = await insertExecutions(t.db, Array.from({ length: 50 }, (_, i) => ({ task, data: { i: chunk * 50 + i } })));
      ids.push(...scheduled.map((r) => r.execution.id));
    }
    const worker = await startWorker(t, [defineTask({ name: task, run: async (_ctx, data) => data })], { concurrency: 16 });
    try {
      await waitUntil(async () => (await queryRows(t.db, "SELECT 1 FROM stepwise.executions WHERE task = ? AND status <> 'completed'", [task])).length === 0, 'all completed');
    } finally {
      await worker.stop();
    }
    const rows = await queryRows<{ execution_id: string; n: number }>(t.db, "SELECT execution_id, count(*)::int AS n FROM stepwise.webhook_deliveries WHERE event_type = 'execution.completed' AND execution_id = ANY(?::uuid[]) GROUP BY execution_id", [ids]);
    expect(rows).toHaveLength(200);
    expect(rows.every((r) => r.n === 1)).toBe(true);
  });

  test('a webhook hears only its events and its tasks', async () => {
    const onlyCompleted = await subscribe('/completed', ['execution.completed']);
    const task = uniqueTask('mine');
    const other = uniqueTask('other');
    const onlyMine = await subscribe('/mine', ALL, [task]);

    const failed = await scheduled(task);
    await failAs(t.db, await claimExecution(t.db, task, failed), 'no');
    const done = await scheduled(other);
    await completeAs(t.db, await claimExecution(t.db, other, done), null);

    expect((await deliveriesOf(failed)).map((d) => [d.webhook_id, d.event_type])).toEqual([[onlyMine, 'execution.failed']]);
    expect((await deliveriesOf(done)).map((d) => [d.webhook_id, d.event_type])).toEqual([[onlyCompleted, 'execution.completed']]);
  });

  test('a status change that rolls back queues nothing, and neither does a completion fenced out by a cancel', async () => {
    await subscribe('/rollback');
    const task = uniqueTask('rollback');
    const id = await scheduled(task);
    const lease = await claimExecution(t.db, task, id);
    await t.db
      .transaction(async (trx) => {
        await trx.raw("UPDATE stepwise.executions SET status = 'completed', completed_at = now(), output = '1' WHERE id = ?", [id]);
        expect(await queryRows(trx, 'SELECT 1 FROM stepwise.webhook_deliveries WHERE execution_id = ?', [id])).toHaveLength(1);
        throw new Error('roll back');
      })
      .catch((err: Error) => expect(err.message).toBe('roll back'));
    expect(await deliveriesOf(id)).toEqual([]);

    await cancelExecution(t.db, id);
    expect(await completeAs(t.db, lease, 'late')).toBe(false);
    expect((await deliveriesOf(id)).map((d) => d.event_type)).toEqual(['execution.cancelled']);
  });

  test('a cancel queues a cancelled delivery for each child its cascade cancels', async () => {
    await subscribe('/cascade', ['execution.cancelled']);
    const task = uniqueTask('parent');
    const parent = await scheduled(task);
    const [{ execution: child }] = await insertExecutions(t.db, [{ task, data: {} }]);
    await queryRows(t.db, 'UPDATE stepwise.executions SET parent_id = ? WHERE id = ?', [parent, child.id]);
    await cancelExecution(t.db, parent);
    expect((await deliveriesOf(child.id)).map((d) => [d.event_type, d.payload.data.parent_execution_id])).toEqual([['execution.cancelled', parent]]);
    expect(await deliveriesOf(parent)).toHaveLength(1);
  });

  test('a claim handed back unstarted to waiting is not a new wait', async () => {
    await subscribe('/unstarted', ['execution.waiting']);
    const task = uniqueTask('resume');
    const id = await scheduled(task);
    const lease = await claimExecution(t.db, task, id);
    await suspendExecution(t.db, lease, [{ seq: 0, name: 'nap', kind: 'sleep', wakeAt: new Date(Date.now() - 1000) }], null, 'nap');
    const [resumed] = await claimExecutions(t.db, [task], 10, 30000);
    expect(resumed.previousStatus).toBe('waiting');
    await returnUnstarted(t.db, [{ id, token: resumed.execution.leaseToken as string, previousStatus: 'waiting' }]);
    expect((await queryRows<{ status: string }>(t.db, 'SELECT status FROM stepwise.executions WHERE id = ?', [id]))[0].status).toBe('waiting');
    expect((await deliveriesOf(id)).map((d) => d.payload.data.current_step)).toEqual(['nap']);
  });

  test('an output over 256 KiB is left out of the payload, flagged', async () => {
    await subscribe('/big', ['execution.completed']);
    const task = uniqueTask('big');
    const id = await scheduled(task);
    await completeAs(t.db, await claimExecution(t.db, task, id), { blob: 'x'.repeat(300 * 1024) });
    const [d] = await deliveriesOf(id);
    expect(d.payload.data).toMatchObject({ output: null, output_omitted: true });
  });

  test('without webhooks, status changes queue nothing', async () => {
    const task = uniqueTask('quiet');
    const id = await scheduled(task);
    await completeAs(t.db, await claimExecution(t.db, task, id), 1);
    expect(await deliveriesOf(id)).toEqual([]);
  });

  test('deleting a webhook deletes its deliveries; one queued for it while it was deleted is dropped by the claim', async () => {
    const webhook = await subscribe('/deleted');
    const task = uniqueTask('deleted');
    const id = await scheduled(task);
    await completeAs(t.db, await claimExecution(t.db, task, id), 1);
    expect(await deliveriesOf(id)).toHaveLength(1);
    expect(await deleteWebhook(t.db, webhook)).toBe(true);
    expect(await deliveriesOf(id)).toEqual([]);
    expect(await deleteWebhook(t.db, webhook)).toBe(false);

    // As if a transition's trigger had read the webhook just before its deletion committed.
    await queryRows(t.db, "INSERT INTO stepwise.webhook_deliveries (id, webhook_id, event_type, execution_id, payload) VALUES (gen_random_uuid(), ?, 'execution.completed', ?, '{}')", [webhook, id]);
    expect(await claimDueDeliveries(t.db, 10, 30000, randomUUID())).toEqual([]);
    expect(await deliveriesOf(id)).toEqual([]);
  });
});

describe('the deliverer', () => {
  test('delivers each queued message once, signed, and records the attempt', async () => {
    const webhook = await subscribe('/signed');
    const task = uniqueTask('signed');
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const id = await scheduled(task);
      await completeAs(t.db, await claimExecution(t.db, task, id), { id });
      ids.push(id);
    }
    const d = deliverer();
    await d.start();
    try {
      await waitUntil(() => receiver.verifiedAt('/signed').length === 2, 'two signed deliveries');
      const page = await waitUntil(async () => {
        const p = await listDeliveries(t.db, webhook, 10, 0);
        return p.items.every((i) => i.status === 'delivered') ? p : undefined;
      }, 'both delivered');
      expect(page.total).toBe(2);
      for (const item of page.items) {
        expect(item).toMatchObject({ attempts: 1, nextAttemptAt: null });
        expect(item.log).toEqual([{ at: expect.any(Date), statusCode: 200, latencyMs: expect.any(Number), error: null }]);
      }
    } finally {
      await d.stop();
    }
    const got = receiver.verifiedAt('/signed');
    expect(got.map((r) => r.payload?.data.execution_id).sort()).toEqual([...ids].sort());
    expect(got.every((r) => r.contentType === 'application/json')).toBe(true);
    expect(new Set(got.map((r) => r.id)).size).toBe(2);
    expect(receiver.received.filter((r) => r.path === '/signed' && !r.verified)).toEqual([]);
  });

  test('retries with backoff after 500s, then delivers; the same webhook-id every time', async () => {
    const webhook = await subscribe('/flaky', ['execution.completed']);
    receiver.respond = (_path, attempt) => (attempt <= 2 ? 500 : 204);
    const task = uniqueTask('flaky');
    const id = await scheduled(task);
    await completeAs(t.db, await claimExecution(t.db, task, id), 1);
    const d = deliverer({ retryBaseMs: 150 });
    await d.start();
    try {
      const pending = await waitUntil(async () => {
        const [item] = (await listDeliveries(t.db, webhook, 10, 0)).items;
        return item.attempts === 1 ? item : undefined;
      }, 'a first failed attempt');
      expect(pending).toMatchObject({ status: 'pending', log: [{ statusCode: 500, error: 'answered 500' }] });
      expect(pending.nextAttemptAt).toBeInstanceOf(Date);
      const [done] = await waitUntil(async () => {
        const items = (await listDeliveries(t.db, webhook, 10, 0)).items;
        return items[0].status === 'delivered' ? items : undefined;
      }, 'delivered after retries');
      expect(done.attempts).toBe(3);
      expect(done.log.map((a) => a.statusCode)).toEqual([500, 500, 204]);
      expect(done.log.map((a) => a.error)).toEqual(['answered 500', 'answered 500', null]);
      // About 150 ms, then 900 ms (±20 %), measured on the database's clock.
      const gaps = done.log.slice(1).map((a, i) => a.at.getTime() - done.log[i].at.getTime());
      expect(gaps[0]).toBeGreaterThanOrEqual(110);
      expect(gaps[1]).toBeGreaterThanOrEqual(700);
    } finally {
      await d.stop();
    }
    const got = receiver.received.filter((r) => r.path === '/flaky');
    expect(got.map((r) => r.status)).toEqual([500, 500, 204]);
    expect(new Set(got.map((r) => r.id)).size).toBe(1);
    expect(got.every((r) => r.verified)).toBe(true);
  });

  test('fails a delivery once its retry period is over', async () => {
    const webhook = await subscribe('/down', ['execution.completed']);
    receiver.respond = () => 503;
    const task = uniqueTask('down');
    const id = await scheduled(task);
    await completeAs(t.db, await claimExecution(t.db, task, id), 1);
    const d = deliverer({ retryBaseMs: 50, retryForMs: 400 });
    await d.start();
    try {
      const [failed] = await waitUntil(async () => {
        const items = (await listDeliveries(t.db, webhook, 10, 0)).items;
        return items[0].status === 'failed' ? items : undefined;
      }, 'failed');
      expect(failed.attempts).toBeGreaterThanOrEqual(2);
      expect(failed.nextAttemptAt).toBeNull();
      expect(failed.log.every((a) => a.statusCode === 503)).toBe(true);
    } finally {
      await d.stop();
    }
  });

  test('a name that resolves to a refused address at delivery time is not connected to, and the attempt says why', async () => {
    const secret = newWebhookSecret();
    const port = new URL(receiver.url('/')).port;
    const webhook = (await createWebhook(t.db, { id: randomUUID(), url: `http://hooks.rebind.test:${port}/rebound`, events: ['execution.completed'], secret })).id;
    const task = uniqueTask('rebind');
    const id = await scheduled(task);
    await completeAs(t.db, await claimExecution(t.db, task, id), 1);
    const d = deliverer({ policy: { allowPrivate: true, resolve: async () => [{ address: '169.254.169.254', family: 4 }] }, retryBaseMs: 60_000 });
    await d.start();
    try {
      const [item] = await waitUntil(async () => {
        const items = (await listDeliveries(t.db, webhook, 10, 0)).items;
        return items[0].attempts === 1 ? items : undefined;
      }, 'one attempt');
      expect(item.status).toBe('pending');
      expect(item.log[0]).toMatchObject({ statusCode: null, error: expect.stringMatching(/^refused target: hooks\.rebind\.test resolves to a cloud metadata address/) });
    } finally {
      await d.stop();
    }
    expect(receiver.received.filter((r) => r.path === '/rebound')).toEqual([]);
  });

  test("a crashed deliverer's claimed deliveries are taken again once its lease runs out; its late record is fenced out", async () => {
    const webhook = await subscribe('/crash', ['execution.completed']);
    const task = uniqueTask('crash');
    const id = await scheduled(task);
    await completeAs(t.db, await claimExecution(t.db, task, id), 1);
    // The crashed deliverer: it claimed, then died before recording anything.
    const [held] = await claimDueDeliveries(t.db, 10, 1500, randomUUID());
    expect(held.webhookId).toBe(webhook);
    expect(await claimDueDeliveries(t.db, 10, 1500, randomUUID())).toEqual([]);
    const d = deliverer();
    await d.start();
    try {
      await waitUntil(() => receiver.verifiedAt('/crash').length === 1, 'the delivery, after the lease');
      const [item] = await waitUntil(async () => {
        const items = (await listDeliveries(t.db, webhook, 10, 0)).items;
        return items[0].status === 'delivered' ? items : undefined;
      }, 'delivered');
      expect(item.attempts).toBe(1);
      expect(Date.now() - item.createdAt.getTime()).toBeGreaterThanOrEqual(1400);
    } finally {
      await d.stop();
    }
    expect(await recordAttempts(t.db, [{ delivery: held, result: { delivered: true, statusCode: 200, latencyMs: 1, error: null }, retryDelayMs: 0 }], 60_000)).toEqual(new Map());
  });
});

describe('metrics', () => {
  test('attempts by outcome, their latency, and the backlog read at each scrape', async () => {
    const webhook = await subscribe('/metered', ['execution.completed']);
    const registry = new Registry();
    const observer = observeWebhookDeliveries(registry, t.db);
    const task = uniqueTask('metered');
    const id = await scheduled(task);
    await completeAs(t.db, await claimExecution(t.db, task, id), 1);
    await queryRows(t.db, "UPDATE stepwise.webhook_deliveries SET due_at = now() - interval '5 seconds' WHERE webhook_id = ?", [webhook]);
    let text = await registry.metrics();
    expect(text).toMatch(/^stepwise_webhook_backlog 1$/m);
    expect(Number(/^stepwise_webhook_backlog_overdue_seconds (\S+)$/m.exec(text)?.[1])).toBeGreaterThanOrEqual(5);

    const d = deliverer({ observer });
    await d.start();
    try {
      await waitUntil(() => receiver.verifiedAt('/metered').length === 1, 'the delivery');
      await waitUntil(async () => /stepwise_webhook_attempts_total\{outcome="delivered"\} 1/.test(await registry.metrics()), 'the attempt counted');
    } finally {
      await d.stop();
    }
    text = await registry.metrics();
    expect(text).toMatch(/^stepwise_webhook_backlog 0$/m);
    expect(text).toMatch(/^stepwise_webhook_backlog_overdue_seconds 0$/m);
    expect(text).toMatch(/^stepwise_webhook_attempt_seconds_count\{outcome="delivered"\} 1$/m);
  });
});

describe('retention', () => {
  test('delivered and failed deliveries created before the cutoff are deleted; pending and newer ones stay', async () => {
    const webhook = await subscribe('/old');
    const insert = (status: string, daysAgo: number) =>
      queryRows<{ id: string }>(
        t.db,
        `INSERT INTO stepwise.webhook_deliveries (id, webhook_id, event_type, payload, status, created_at, due_at)
         VALUES (gen_random_uuid(), ?, 'webhook.test', '{}', ?, now() - make_interval(days => ?), CASE WHEN ? = 'pending' THEN now() + interval '1 hour' END) RETURNING id`,
        [webhook, status, daysAgo, status],
      );
    const gone = [...(await insert('delivered', 40)), ...(await insert('failed', 31))].map((r) => r.id);
    const kept = [...(await insert('pending', 40)), ...(await insert('delivered', 2))].map((r) => r.id);
    expect(await deleteFinishedDeliveries(t.db, new Date(Date.now() - 35 * 86_400_000), 1000)).toBe(1);
    // The executions' sweep deletes them too, after the same period.
    await new RetentionSweeper({ db: t.db, log: quietLog, keepFinishedMs: 30 * 86_400_000 }).sweep();
    const left = new Set((await queryRows<{ id: string }>(t.db, 'SELECT id FROM stepwise.webhook_deliveries')).map((r) => r.id));
    expect(gone.filter((id) => left.has(id))).toEqual([]);
    expect(kept.filter((id) => !left.has(id))).toEqual([]);
  });
});
