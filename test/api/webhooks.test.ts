// The webhook API over real HTTP with the typed client (every answer checked against openapi.yaml),
// end to end: a real worker runs executions, the deliverer POSTs their events to a real receiver
// that verifies every signature with the `standardwebhooks` package.
import { randomUUID } from 'node:crypto';
import { defineTask, NonRetryableError, Type } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { StepwiseApiError, type WebhookEventType } from '../../src/client';
import { WebhookDeliverer } from '../../src/webhooks/deliverer';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { waitUntil } from '../helpers/wait-until';
import { WebhookReceiver } from '../helpers/webhook-receiver';
import { quietLog, startWorker } from '../helpers/worker';

const ALL: WebhookEventType[] = ['execution.completed', 'execution.failed', 'execution.cancelled', 'execution.waiting'];
const JSON_HEADERS = { 'Content-Type': 'application/json' };

const ok = defineTask({ name: 'wh-ok', data: Type.Object({ n: Type.Integer() }), run: async (ctx, data) => ctx.step('double', () => ({ doubled: data.n * 2 })) });
const broken = defineTask({
  name: 'wh-broken',
  run: async () => {
    throw new NonRetryableError('the order is gone');
  },
});
const napping = defineTask({
  name: 'wh-napping',
  run: async (ctx) => {
    await ctx.sleep('nap', '1h');
    return 'rested';
  },
});
const other = defineTask({ name: 'wh-other', run: async () => 'other' });
// An output whose keys jsonb would reorder (it sorts by length) and a string with ", " and ": ".
const ordered = defineTask({ name: 'wh-ordered', run: async () => ({ zeta: 1, a: { y: 'b, c: d', x: [1, 2.50] }, '10': null }) });

let api: TestApi;
let strict: TestApi;
let worker: Worker;
let deliverer: WebhookDeliverer;
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  api = await startTestApi({ webhooks: { allowPrivateTargets: true } });
  // A second server on the same database with the default policy: private targets refused.
  strict = await startTestApi({ db: { db: api.db, url: api.t.url } });
  worker = await startWorker(api.t, [ok, broken, napping, other, ordered] as never);
  deliverer = new WebhookDeliverer({ db: api.db, databaseUrl: api.t.url, log: quietLog, policy: { allowPrivate: true }, pollIntervalMs: 100, retryBaseMs: 100 });
  await deliverer.start();
});
afterAll(async () => {
  await deliverer.stop();
  await worker.stop();
  await strict.close();
  await api.close();
  await receiver.close();
});

/** Subscribes a receiver path and registers its secret with the receiver. */
async function subscribe(path: string, events: WebhookEventType[] = ALL, tasks?: string[]) {
  const created = await api.client.createWebhook(receiver.url(path), events, { tasks });
  receiver.setSecret(path, created.secret);
  return created;
}

async function rejection(call: Promise<unknown>): Promise<StepwiseApiError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(StepwiseApiError);
  return err as StepwiseApiError;
}

describe('subscriptions', () => {
  test('POST answers 201 with the secret, which no other answer shows again', async () => {
    const created = await api.client.createWebhook(receiver.url('/shown-once'), ['execution.completed', 'execution.failed'], { tasks: ['wh-ok'] });
    expect(created).toEqual({
      webhook_id: expect.any(String),
      url: receiver.url('/shown-once'),
      events: ['execution.completed', 'execution.failed'],
      tasks: ['wh-ok'],
      created_at: expect.any(String),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    const listed = (await api.client.listWebhooks()).find((w) => w.webhook_id === created.webhook_id);
    expect(listed).toEqual({ webhook_id: created.webhook_id, url: created.url, events: created.events, tasks: ['wh-ok'], created_at: created.created_at });
    const listText = (await api.call('GET', '/api/v1/webhooks')).text;
    const deliveries = (await api.call('GET', `/api/v1/webhooks/${created.webhook_id}/deliveries`)).text;
    for (const text of [listText, deliveries]) {
      expect(text).not.toContain(created.secret.slice(6));
      expect(text).not.toContain('secret');
    }
    expect((await api.client.createWebhook(receiver.url('/shown-once'), ['execution.completed'])).secret).not.toBe(created.secret);
  });

  test('events must be a non-empty list of known types, each once; tasks non-empty when given', async () => {
    const bodies = [
      { url: receiver.url('/x'), events: [] },
      { url: receiver.url('/x'), events: ['execution.completed', 'execution.completed'] },
      { url: receiver.url('/x'), events: ['execution.started'] },
      { url: receiver.url('/x'), events: ['execution.failed'], tasks: [] },
      { url: receiver.url('/x') },
      { events: ['execution.failed'] },
      { url: receiver.url('/x'), events: ['execution.failed'], secret: 'mine' },
    ];
    for (const body of bodies) {
      const res = await api.call('POST', '/api/v1/webhooks', { headers: JSON_HEADERS, body: JSON.stringify(body) });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: { code: 'invalid_data' } });
    }
  });

  test.each([
    ['the metadata address', 'http://169.254.169.254/latest/meta-data/', /cloud metadata/],
    ['a link-local IPv6 address', 'http://[fe80::1]:8080/', /link-local/],
    ['the metadata host name', 'http://metadata.google.internal/computeMetadata/v1/', /metadata endpoint/],
    ['AWS metadata over IPv6', 'http://[fd00:ec2::254]/', /cloud metadata/],
    ['the metadata address inside IPv6 (IPv4-compatible)', 'http://[::169.254.169.254]/', /cloud metadata/],
    ['the metadata address inside 6to4', 'http://[2002:a9fe:a9fe::]/', /cloud metadata/],
    ['the metadata address inside local-use NAT64', 'http://[64:ff9b:1:a9fe:a9:fe00::]/', /cloud metadata/],
    ['the metadata address as a Teredo client', 'http://[2001:0:4136:e378:8000:63bf:5601:5601]/', /cloud metadata/],
    ['another scheme', 'file:///etc/passwd', /http or https/],
    ['credentials in the URL', 'https://user:secret@hooks.example.com/', /credentials/],
  ])('%s is refused with 422 naming body/url, whatever the operator allows', async (_what, url, why) => {
    for (const server of [api, strict]) {
      const err = await rejection(server.client.createWebhook(url, ['execution.completed']));
      expect(err.status).toBe(422);
      expect(err.code).toBe('invalid_data');
      expect(err.details).toEqual([{ path: 'body/url', message: expect.stringMatching(why) }]);
    }
  });

  test.each([
    ['a private address', 'http://10.0.0.1/hook', /private address/],
    ['loopback', 'http://127.0.0.1:9/hook', /loopback address/],
    ['localhost', 'http://localhost:9/hook', /loopback address/],
  ])('%s is refused unless the operator allows private targets', async (_what, url, why) => {
    const err = await rejection(strict.client.createWebhook(url, ['execution.completed']));
    expect(err.status).toBe(422);
    expect(err.details).toEqual([{ path: 'body/url', message: expect.stringMatching(why) }]);
    const created = await api.client.createWebhook(url, ['execution.completed']);
    await api.client.deleteWebhook(created.webhook_id);
  });

  test('unknown and malformed ids are 404 webhook_not_found on every webhook operation', async () => {
    for (const id of [randomUUID(), 'nope', '9'.repeat(300)]) {
      const p = `/api/v1/webhooks/${encodeURIComponent(id)}`;
      const answers = await Promise.all([api.call('DELETE', p), api.call('GET', `${p}/deliveries`), api.call('POST', `${p}/test`)]);
      for (const a of answers) {
        expect(a.status).toBe(404);
        expect(a.body).toMatchObject({ error: { code: 'webhook_not_found' } });
      }
    }
  });

  test('DELETE answers 204 and the webhook is gone; deleting it again is 404', async () => {
    const created = await subscribe('/gone');
    const res = await api.call('DELETE', `/api/v1/webhooks/${created.webhook_id}`);
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect((await api.client.listWebhooks()).map((w) => w.webhook_id)).not.toContain(created.webhook_id);
    expect((await rejection(api.client.deleteWebhook(created.webhook_id))).code).toBe('webhook_not_found');
  });
});

describe('deliveries', () => {
  test('completing, failing, waiting and cancelling executions each deliver their event, signed, with the execution as it was', async () => {
    const hook = await subscribe('/lifecycle');
    const done = await api.client.schedule('wh-ok', { n: 21 }, { tags: ['eu'] });
    const failed = await api.client.schedule('wh-broken', {});
    const napping = await api.client.schedule('wh-napping', {});
    const byType = async (id: string, type: string) =>
      waitUntil(() => receiver.verifiedAt('/lifecycle').find((r) => r.payload?.data.execution_id === id && r.payload.type === type), `${type} of ${id}`);

    const completed = await byType(done.execution_id, 'execution.completed');
    expect(completed.payload?.data).toMatchObject({ execution_id: done.execution_id, task: 'wh-ok', status: 'completed', output: { doubled: 42 }, output_omitted: false, error: null, tags: ['eu'], attempt: 1 });
    expect((await byType(failed.execution_id, 'execution.failed')).payload?.data).toMatchObject({ status: 'failed', output: null, error: { type: 'NonRetryableError', message: 'the order is gone', retryable: false } });
    expect((await byType(napping.execution_id, 'execution.waiting')).payload?.data).toMatchObject({ status: 'waiting', current_step: 'nap' });
    await api.client.cancel(napping.execution_id);
    expect((await byType(napping.execution_id, 'execution.cancelled')).payload?.data).toMatchObject({ status: 'cancelled', error: { type: 'cancelled' } });

    const page = await waitUntil(async () => {
      const p = await api.client.listWebhookDeliveries(hook.webhook_id);
      return p.total === 4 && p.deliveries.every((d) => d.status === 'delivered') ? p : undefined;
    }, 'four deliveries delivered');
    expect(page).toMatchObject({ total: 4, limit: 50, offset: 0 });
    expect(page.deliveries.map((d) => d.event_type).sort()).toEqual(['execution.cancelled', 'execution.completed', 'execution.failed', 'execution.waiting']);
    for (const d of page.deliveries) {
      expect(d).toMatchObject({ status: 'delivered', attempts: 1, last_status_code: 200, last_error: null, next_attempt_at: null });
      expect(d.last_latency_ms).toBeGreaterThanOrEqual(0);
      expect(d.attempt_log).toHaveLength(1);
      // The delivery's id is the webhook-id its receiver saw.
      expect(receiver.verifiedAt('/lifecycle').some((r) => r.id === d.delivery_id)).toBe(true);
    }
    expect(receiver.received.filter((r) => r.path === '/lifecycle' && !r.verified)).toEqual([]);
    const second = await api.client.listWebhookDeliveries(hook.webhook_id, { limit: 2, offset: 2 });
    expect(second.deliveries.map((d) => d.delivery_id)).toEqual(page.deliveries.slice(2).map((d) => d.delivery_id));
  });

  test('a body is compact JSON in the documented field order, with the output as the handler wrote it', async () => {
    await subscribe('/ordered', ['execution.completed'], ['wh-ordered']);
    const { execution_id: id } = await api.client.schedule('wh-ordered', {});
    const got = await waitUntil(() => receiver.verifiedAt('/ordered').find((r) => r.payload?.data.execution_id === id), 'the completed webhook');
    const e = await api.client.get(id);
    const instant = (s: string | null) => (s === null ? 'null' : JSON.stringify(new Date(s).toISOString()));
    expect(got.body).toBe(
      `{"type":"execution.completed","timestamp":${instant(e.completed_at)},"data":{"execution_id":"${id}","task":"wh-ordered","status":"completed","attempt":1,` +
        `"current_step":null,"idempotency_key":null,"tags":[],"parent_execution_id":null,"created_at":${instant(e.created_at)},"started_at":${instant(e.started_at)},` +
        `"completed_at":${instant(e.completed_at)},"output":{"10":null,"zeta":1,"a":{"y":"b, c: d","x":[1,2.5]}},"output_omitted":false,"error":null}}`,
    );
  });

  test('a webhook for some tasks and some events hears only those', async () => {
    await subscribe('/filtered', ['execution.completed'], ['wh-other']);
    const mine = await api.client.schedule('wh-other', {});
    const notMine = await api.client.schedule('wh-ok', { n: 1 });
    const failed = await api.client.schedule('wh-broken', {});
    await Promise.all([mine, notMine, failed].map((e) => api.client.wait(e.execution_id)));
    await waitUntil(() => receiver.verifiedAt('/filtered').length > 0, 'the delivery');
    // Deliveries are queued in the transaction of the change: once all three have ended, the outbox
    // holds every delivery they will ever queue for this webhook.
    const pending = await api.db.raw("SELECT count(*)::int AS n FROM stepwise.webhook_deliveries d JOIN stepwise.webhooks w ON w.id = d.webhook_id WHERE w.url LIKE '%/filtered'");
    expect(pending.rows[0].n).toBe(1);
    expect(receiver.verifiedAt('/filtered').map((r) => [r.payload?.type, r.payload?.data.execution_id])).toEqual([['execution.completed', mine.execution_id]]);
  });

  test('500s are retried with backoff until a 2xx; the deliveries endpoint shows each attempt', async () => {
    const hook = await subscribe('/retried', ['execution.completed'], ['wh-other']);
    receiver.respond = (path, attempt) => (path === '/retried' && attempt <= 2 ? 500 : 200);
    try {
      const e = await api.client.schedule('wh-other', {});
      const retrying = await waitUntil(async () => {
        const [d] = (await api.client.listWebhookDeliveries(hook.webhook_id)).deliveries;
        return d?.attempts === 1 ? d : undefined;
      }, 'a failed first attempt');
      expect(retrying).toMatchObject({ execution_id: e.execution_id, status: 'pending', last_status_code: 500, last_error: 'answered 500' });
      expect(retrying.next_attempt_at).not.toBeNull();
      const [d] = await waitUntil(async () => {
        const list = (await api.client.listWebhookDeliveries(hook.webhook_id)).deliveries;
        return list[0]?.status === 'delivered' ? list : undefined;
      }, 'delivered');
      expect(d).toMatchObject({ attempts: 3, last_status_code: 200, last_error: null, next_attempt_at: null });
      expect(d.attempt_log.map((a) => [a.status_code, a.error])).toEqual([[500, 'answered 500'], [500, 'answered 500'], [200, null]]);
      expect(receiver.verifiedAt('/retried').map((r) => r.id)).toEqual([d.delivery_id, d.delivery_id, d.delivery_id]);
    } finally {
      receiver.respond = () => 200;
    }
  });

  test('POST …/test answers 202 with the queued delivery, and the receiver gets a signed webhook.test', async () => {
    const hook = await subscribe('/tested', ['execution.failed']);
    const res = await api.call('POST', `/api/v1/webhooks/${hook.webhook_id}/test`);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ event_type: 'webhook.test', execution_id: null, status: 'pending', attempts: 0, attempt_log: [] });
    const got = await waitUntil(() => receiver.verifiedAt('/tested')[0], 'the test message');
    expect(got.id).toBe((res.body as { delivery_id: string }).delivery_id);
    expect(got.payload).toEqual({ type: 'webhook.test', timestamp: expect.any(String), data: { webhook_id: hook.webhook_id } });
    expect((await api.client.testWebhook(hook.webhook_id)).event_type).toBe('webhook.test');
  });
});
