// `stepwise webhooks` as a real process against a real API server, worker and deliverer, delivering to
// a real receiver on 127.0.0.1 that verifies every signature with the secret the command printed.
import { defineTask } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { WebhookDeliverer } from '../../src/webhooks/deliverer';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { runStepwise } from '../helpers/stepwise-cli';
import { waitUntil } from '../helpers/wait-until';
import { WebhookReceiver } from '../helpers/webhook-receiver';
import { quietLog, startWorker } from '../helpers/worker';

// Every command is a new Node process that loads the CLI from TypeScript: about 1.5 s of CPU each.
jest.setTimeout(120_000);

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const MISSING = '0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9e01';

const quick = defineTask({ name: 'cli-wh-quick', run: async (ctx) => ctx.step('compute', () => 42) });

let api: TestApi;
let worker: Worker;
let deliverer: WebhookDeliverer;
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  // The receiver listens on loopback: a private target, which the operator must allow.
  api = await startTestApi({ webhooks: { allowPrivateTargets: true } });
  worker = await startWorker(api.t, [quick] as never);
  deliverer = new WebhookDeliverer({ db: api.db, databaseUrl: api.t.url, log: quietLog, policy: { allowPrivate: true }, pollIntervalMs: 100, retryBaseMs: 100 });
  await deliverer.start();
});
afterAll(async () => {
  await deliverer.stop();
  await worker.stop();
  await api.close();
  await receiver.close();
});

/** `stepwise ARGS --url <the test server>`. */
function stepwise(args: string[]) {
  return runStepwise([...args, '--url', api.api.url]);
}

/** A table's cells: the header line and the rows, split on the two-space column gaps. */
function tableOf(stdout: string): { header: string[]; rows: string[][]; lines: string[] } {
  const lines = stdout.trimEnd().split('\n');
  const cells = (line: string) => line.trim().split(/\s{2,}/);
  return { header: cells(lines[0]), rows: lines.slice(1).map(cells), lines };
}

/** Adds a webhook for `path` of the receiver with the CLI, and hands the printed secret to the receiver. */
async function addWebhook(path: string, extra: string[] = []): Promise<{ id: string; stdout: string }> {
  const added = await stepwise(['webhooks', 'add', receiver.url(path), ...extra]);
  expect(added).toMatchObject({ code: 0, stderr: '' });
  const id = new RegExp(`^webhook +(${UUID})$`, 'm').exec(added.stdout)?.[1];
  const secret = /^secret +(whsec_\S+)$/m.exec(added.stdout)?.[1];
  expect(id).toBeDefined();
  expect(secret).toBeDefined();
  receiver.setSecret(path, secret as string);
  return { id: id as string, stdout: added.stdout };
}

async function deliveredCount(id: string, total: number): Promise<boolean> {
  const { deliveries } = await api.client.listWebhookDeliveries(id);
  return deliveries.length === total && deliveries.every((d) => d.status === 'delivered');
}

describe('stepwise webhooks', () => {
  test('add prints the id and the secret once, for every event and task by default; --json prints the API answer', async () => {
    const { id, stdout } = await addWebhook('/cli-default');
    expect(stdout).toBe(
      `webhook  ${id}\n` +
        `url      ${receiver.url('/cli-default')}\n` +
        'events   execution.completed, execution.failed, execution.cancelled, execution.waiting\n' +
        'tasks    all\n' +
        `secret   ${/whsec_\S+/.exec(stdout)?.[0]}\n` +
        '\nThe secret is shown only once: store it now. It verifies the webhook-signature header of every delivery (Standard Webhooks).\n',
    );

    const json = await stepwise(['webhooks', 'add', receiver.url('/cli-json'), '--event', 'execution.failed', '--event', 'execution.failed', '--task', 'a', '--task', 'b', '--json']);
    expect(json).toMatchObject({ code: 0, stderr: '' });
    const created = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(created).toEqual({
      webhook_id: expect.stringMatching(new RegExp(`^${UUID}$`)),
      url: receiver.url('/cli-json'),
      events: ['execution.failed'],
      tasks: ['a', 'b'],
      created_at: expect.any(String),
      secret: expect.stringMatching(/^whsec_/),
    });
    // Listed from now on, without the secret.
    const listed = (await api.client.listWebhooks()).find((w) => w.webhook_id === created.webhook_id);
    expect(listed).toEqual({ ...created, secret: undefined });
  });

  test('list shows each webhook with its events, tasks and creation; --json equals GET /webhooks', async () => {
    const { id } = await addWebhook('/cli-list', ['--event', 'execution.completed', '--event', 'execution.waiting', '--task', quick.name]);
    const [text, json] = await Promise.all([stepwise(['webhooks', 'list']), stepwise(['webhooks', 'list', '--json'])]);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    const { header, rows } = tableOf(text.stdout);
    expect(header).toEqual(['ID', 'URL', 'EVENTS', 'TASKS', 'CREATED (UTC)']);
    const all = await api.client.listWebhooks();
    expect(rows.map((cells) => cells[0])).toEqual(all.map((w) => w.webhook_id));
    const created = all.find((w) => w.webhook_id === id)?.created_at ?? '';
    expect(rows.find((cells) => cells[0] === id)).toEqual([
      id,
      receiver.url('/cli-list'),
      'execution.completed,execution.waiting',
      quick.name,
      created.slice(0, 19).replace('T', ' '),
    ]);
    expect(JSON.parse(json.stdout)).toEqual({ webhooks: all });
  });

  test('test queues a signed webhook.test that deliveries then shows delivered, beside an execution event', async () => {
    const path = '/cli-deliveries';
    const { id } = await addWebhook(path, ['--event', 'execution.completed', '--task', quick.name]);
    const queued = await stepwise(['webhooks', 'test', id]);
    expect(queued).toMatchObject({ code: 0, stderr: '' });
    const deliveryId = new RegExp(`^queued test delivery (${UUID}) to webhook ${id} \\(pending\\); follow it with: stepwise webhooks deliveries ${id}\\n$`).exec(queued.stdout)?.[1];
    expect(deliveryId).toBeDefined();
    await waitUntil(() => deliveredCount(id, 1), 'the test message to be delivered');
    expect(receiver.verifiedAt(path).map((r) => [r.id, r.payload?.type])).toEqual([[deliveryId, 'webhook.test']]);

    const { execution_id: executionId } = await api.client.schedule(quick.name);
    await waitUntil(() => deliveredCount(id, 2), 'the completion to be delivered');

    const [text, json, paged] = await Promise.all([
      stepwise(['webhooks', 'deliveries', id]),
      stepwise(['webhooks', 'deliveries', id, '--json']),
      stepwise(['webhooks', 'deliveries', id, '--limit', '1']),
    ]);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    const { header, rows, lines } = tableOf(text.stdout);
    expect(header).toEqual(['DELIVERY', 'EVENT', 'EXECUTION', 'STATUS', 'ATTEMPTS', 'LAST CODE', 'LATENCY', 'NEXT ATTEMPT (UTC)', 'LAST ERROR']);
    // Newest first: the completion, then the test message (no execution).
    expect(rows[0]).toEqual([expect.stringMatching(new RegExp(`^${UUID}$`)), 'execution.completed', executionId, 'delivered', '1', '200', expect.stringMatching(/^\d+ ms$/), '–', '–']);
    expect(rows[1]).toEqual([deliveryId, 'webhook.test', '–', 'delivered', '1', '200', expect.stringMatching(/^\d+ ms$/), '–', '–']);
    expect(lines[lines.length - 1]).toBe('1-2 of 2 deliveries');
    expect(JSON.parse(json.stdout)).toEqual(await api.client.listWebhookDeliveries(id));
    expect(paged.stdout.trimEnd().split('\n').slice(-1)[0]).toBe('1-1 of 2 deliveries (next page: --offset 1)');

    const testJson = await stepwise(['webhooks', 'test', id, '--json']);
    expect(JSON.parse(testJson.stdout)).toMatchObject({ delivery_id: expect.any(String), event_type: 'webhook.test', execution_id: null, status: 'pending', attempts: 0 });
  });

  test('remove unsubscribes a webhook; removing it again is one 404 line and exit 1', async () => {
    const { id } = await addWebhook('/cli-remove');
    const removed = await stepwise(['webhooks', 'remove', id]);
    expect(removed).toEqual({ code: 0, stdout: `removed webhook ${id}; its pending deliveries will not be attempted\n`, stderr: '' });
    expect((await api.client.listWebhooks()).map((w) => w.webhook_id)).not.toContain(id);

    const again = await stepwise(['webhooks', 'remove', id]);
    expect(again).toEqual({ code: 1, stdout: '', stderr: `stepwise: 404 webhook_not_found: webhook "${id}" was not found\n` });
  });
});

describe('stepwise webhooks: errors', () => {
  test('a cloud metadata target is one 422 line naming body/url, and nothing is subscribed', async () => {
    const before = (await api.client.listWebhooks()).length;
    const refused = await stepwise(['webhooks', 'add', 'http://169.254.169.254/']);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toBe(
      "stepwise: 422 invalid_data: the webhook's target is refused (body/url: 169.254.169.254 is a cloud metadata address, which webhooks may never target)\n",
    );
    expect(await api.client.listWebhooks()).toHaveLength(before);
  });

  test('unknown ids are 404 for deliveries and test; an unknown --event or a bad --limit is a usage error (exit 2)', async () => {
    const [deliveries, tested, event, limit] = await Promise.all([
      stepwise(['webhooks', 'deliveries', MISSING]),
      stepwise(['webhooks', 'test', MISSING]),
      stepwise(['webhooks', 'add', receiver.url('/never'), '--event', 'execution.started']),
      stepwise(['webhooks', 'deliveries', MISSING, '--limit', '0']),
    ]);
    for (const r of [deliveries, tested]) expect(r).toMatchObject({ code: 1, stderr: `stepwise: 404 webhook_not_found: webhook "${MISSING}" was not found\n` });
    expect(event.code).toBe(2);
    expect(event.stderr).toBe(
      "stepwise: option '--event <type>' argument 'execution.started' is invalid. must be one of execution.completed, execution.failed, execution.cancelled, execution.waiting (see 'stepwise webhooks add --help')\n",
    );
    expect(limit.code).toBe(2);
    expect(limit.stderr).toMatch(/^stepwise: option '--limit <n>' argument '0' is invalid/);
  });
});
