/**
 * The dashboard and the API reference in real headless Chromium (Debian's package, driven by
 * playwright-core): a real API server with auth on and a base path, a real worker, tasks defined here.
 * Screenshots go to artifacts/screenshots/.
 */
import { randomUUID } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { defineTask, NonRetryableError, Type } from '../../src/index';
import { getSpec } from '../../src/api/spec';
import { formatDuration } from '../../src/domain/format';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { registerTask } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { WebhookDeliverer } from '../../src/webhooks/deliverer';
import { WebhookReceiver } from '../helpers/webhook-receiver';
import { quietLog, startWorker } from '../helpers/worker';

const CHROMIUM = process.env.STEPWISE_CHROMIUM ?? '/usr/bin/chromium';
const SCREENSHOTS = path.resolve(__dirname, '..', '..', 'artifacts', 'screenshots');
const DOCS_IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOKEN = 'ui-test-token-5b1f';
const WORKER_TOKEN = 'ui-test-worker-token-9c2e';
const BASE_PATH = '/sw';
/** The browser's zone: not UTC, and with a half-hour offset and no daylight saving, so local times are unmistakable. */
const BROWSER_TIME_ZONE = 'Asia/Kolkata';
const BROWSER_OFFSET_MS = 330 * 60_000;

jest.setTimeout(120_000);

let releaseReserve: () => void = () => undefined;
const reserveGate = new Promise<void>((resolve) => (releaseReserve = resolve));

const approval = defineTask({
  name: 'ui-approval',
  data: Type.Object({ orderId: Type.String({ minLength: 1 }), hold: Type.Optional(Type.Boolean()) }, { additionalProperties: false }),
  events: { approval: Type.Object({ approved: Type.Boolean(), approver: Type.Optional(Type.String()) }, { additionalProperties: false }) },
  async run(ctx, data) {
    await ctx.step('reserve-stock', async () => {
      // Held until the test has seen the execution `running` in the list.
      if (data.hold) await reserveGate;
      return { reservation: `res-${data.orderId}` };
    });
    const decision = await ctx.waitForEvent('approval', { timeout: '10m' });
    return ctx.step('finish', () => ({ orderId: data.orderId, approved: decision.approved }));
  },
});

const cooldown = defineTask({
  name: 'ui-cooldown',
  data: Type.Object({ minutes: Type.Integer({ minimum: 1 }) }),
  // Declared but never awaited: delivering it must come back as a server error the page shows.
  events: { nudge: Type.Object({}) },
  async run(ctx, data) {
    await ctx.step('prepare', () => ({ ready: true }));
    await ctx.sleep('cool-off', `${data.minutes}m`);
    return { done: true };
  },
});

const quick = defineTask({
  name: 'ui-quick',
  async run(ctx) {
    return ctx.step('compute', () => 42);
  },
});

const newYear = defineTask({
  name: 'ui-new-year',
  cron: { pattern: '0 0 1 1 *', timezone: 'Asia/Tokyo' },
  concurrency: { limit: 1 },
  async run() {
    return 'happy new year';
  },
});

const doomed = defineTask({
  name: 'ui-doomed',
  async run() {
    throw new NonRetryableError('card declined');
  },
});

/** Fails in its second step until the test mends it: what an operator retries from the page. */
let paymentsMended = false;
const flaky = defineTask({
  name: 'ui-flaky',
  async run(ctx) {
    await ctx.step('load-order', () => ({ orderId: 'A-2002' }));
    return ctx.step('charge', () => {
      if (!paymentsMended) throw new NonRetryableError('payment gateway timed out');
      return { charged: true };
    });
  },
});

/** A child that waits for an event, so its parent shows both "waiting for a child" and the child. */
const gate = defineTask({
  name: 'ui-gate',
  events: { open: Type.Null() },
  async run(ctx) {
    await ctx.waitForEvent('open');
    return 'opened';
  },
});

const parentTask = defineTask({
  name: 'ui-parent',
  async run(ctx) {
    return ctx.invoke('through-gate', gate, null);
  },
});

/** At most one running per tenant, 100 starts a minute per tenant; each holds its slot until the test releases them. */
let releaseTenants: () => void = () => undefined;
const tenantGate = new Promise<void>((resolve) => (releaseTenants = resolve));
const tenantSync = defineTask({
  name: 'ui-tenant-sync',
  data: Type.Object({ tenant: Type.String() }),
  concurrency: { limit: 1, key: '/tenant' },
  rateLimit: { limit: 100, period: '1m', key: '/tenant' },
  async run(ctx, data) {
    return ctx.step('sync', async () => {
      await tenantGate;
      return { synced: data.tenant };
    });
  },
});

let t: TestApi;
let worker: Worker;
let deliverer: WebhookDeliverer;
let receiver: WebhookReceiver;
let context: BrowserContext;
let page: Page;
let profileDir: string;
const pageErrors: string[] = [];
const foreignRequests: string[] = [];
let ids: { held: string; sleeping: string; quick: string; doomed: string };

async function screenshot(name: string): Promise<void> {
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** The status badge in the list row of `id`. */
function rowStatus(id: string) {
  return page.locator(`tr[data-execution-id="${id}"] .status`);
}

/** `2024-10-30 12:00:03 UTC`, or the browser zone's `2024-10-30 17:30:03 UTC+05:30`, as the dashboard writes instants. */
function shown(iso: string, zone: 'utc' | 'local'): string {
  if (zone === 'utc') return `${iso.slice(0, 19).replace('T', ' ')} UTC`;
  return `${new Date(Date.parse(iso) + BROWSER_OFFSET_MS).toISOString().slice(0, 19).replace('T', ' ')} UTC+05:30`;
}

/** `YYYY-MM-DDTHH:mm` in UTC, `minutes` from now, as a datetime-local input takes it in UTC mode. */
function utcMinute(minutes: number): string {
  const d = new Date(Date.now() + minutes * 60_000);
  d.setUTCSeconds(0, 0);
  return d.toISOString().slice(0, 16);
}

async function openExecution(id: string): Promise<void> {
  await page.locator(`tr[data-execution-id="${id}"] a.mono`).click();
  await page.locator(`[data-testid="execution-detail"]`).waitFor();
  await page.locator('h1', { hasText: id }).waitFor();
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM}: the dashboard test needs Debian's chromium package. ` +
        'Run scripts/install-chromium.sh (apt-get install -y chromium), or set STEPWISE_CHROMIUM.',
    );
  }
  mkdirSync(SCREENSHOTS, { recursive: true });
  // The webhook receiver listens on loopback: a private target, which the operator must allow.
  t = await startTestApi({ tokens: [TOKEN], workerTokens: [WORKER_TOKEN], basePath: BASE_PATH, webhooks: { allowPrivateTargets: true } });
  worker = await startWorker(t.t, [approval, cooldown, quick, doomed, newYear, gate, parentTask, flaky, tenantSync] as never);
  receiver = await new WebhookReceiver().start();
  deliverer = new WebhookDeliverer({ db: t.db, databaseUrl: t.t.url, log: quietLog, policy: { allowPrivate: true }, pollIntervalMs: 100, retryBaseMs: 100 });
  await deliverer.start();
  const held = await t.client.schedule('ui-approval', { orderId: 'A-1001', hold: true });
  const sleeping = await t.client.schedule('ui-cooldown', { minutes: 30 });
  const q = await t.client.schedule('ui-quick');
  const d = await t.client.schedule('ui-doomed');
  ids = { held: held.execution_id, sleeping: sleeping.execution_id, quick: q.execution_id, doomed: d.execution_id };

  profileDir = mkdtempSync(path.join(tmpdir(), 'stepwise-chromium-'));
  context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1360, height: 900 },
    timezoneId: BROWSER_TIME_ZONE,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  page = context.pages()[0] ?? (await context.newPage());
  const origin = new URL(t.api.url).origin;
  page.on('pageerror', (err) => pageErrors.push(err.message));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && /Content Security Policy|Refused to/i.test(msg.text())) pageErrors.push(msg.text());
  });
  page.on('request', (req) => {
    if (!req.url().startsWith(origin) && !req.url().startsWith('data:')) foreignRequests.push(req.url());
  });
});

afterAll(async () => {
  await context?.close();
  if (profileDir) rmSync(profileDir, { recursive: true, force: true });
  releaseReserve();
  releaseTenants();
  await deliverer?.stop();
  await receiver?.close();
  await worker?.stop();
  await t?.close();
});

afterEach(() => {
  // Working offline means no request leaves the server's origin; no script error, no CSP violation.
  expect(foreignRequests).toEqual([]);
  expect(pageErrors).toEqual([]);
});

describe('dashboard in headless Chromium', () => {
  it('asks for the bearer token after a 401, again after a worker token, and keeps it only in sessionStorage', async () => {
    await page.goto(`${t.api.url}/ui`);
    await page.getByTestId('token-dialog').waitFor();
    // A worker token opens only the worker protocol: the 403 brings the dialog back.
    await page.getByTestId('token-input').fill(WORKER_TOKEN);
    await page.getByTestId('token-submit').click();
    await page.getByTestId('token-dialog').filter({ hasText: 'The server rejected this token' }).waitFor();
    await page.getByTestId('token-input').fill(TOKEN);
    await page.getByTestId('token-submit').click();
    await page.getByTestId('executions-table').waitFor();
    await expect(page.evaluate(() => sessionStorage.getItem('stepwise.token'))).resolves.toBe(TOKEN);
    await expect(page.evaluate(() => localStorage.length)).resolves.toBe(0);
    await expect(page.getByTestId('token-dialog').count()).resolves.toBe(0);
  });

  it('shows the scheduled executions and watches a status change without a reload', async () => {
    await rowStatus(ids.held).filter({ hasText: 'running' }).waitFor();
    await rowStatus(ids.quick).filter({ hasText: 'completed' }).waitFor();
    await rowStatus(ids.doomed).filter({ hasText: 'failed' }).waitFor();
    await rowStatus(ids.sleeping).filter({ hasText: 'waiting' }).waitFor();
    releaseReserve();
    await rowStatus(ids.held).filter({ hasText: 'waiting' }).waitFor({ timeout: 15_000 });
    await expect(page.getByTestId('page-info').textContent()).resolves.toBe('1–4 of 4');
  });

  it('filters the list by status and by task', async () => {
    await page.getByTestId('filter-status').selectOption('waiting');
    await page.getByTestId('page-info').filter({ hasText: 'of 2' }).waitFor();
    expect(page.url()).toContain('#/executions?status=waiting');
    await page.getByTestId('filter-task').selectOption('ui-cooldown');
    await page.getByTestId('page-info').filter({ hasText: '1–1 of 1' }).waitFor();
    await expect(page.locator('tr[data-execution-id]').count()).resolves.toBe(1);
    await page.getByTestId('filter-status').selectOption('');
    await page.getByTestId('filter-task').selectOption('');
    await page.getByTestId('page-info').filter({ hasText: 'of 4' }).waitFor();
  });

  it('shows the detail of a waiting execution: data, what it waits for until when, and the timeline', async () => {
    await openExecution(ids.held);
    await page.getByTestId('wait-info').filter({ hasText: 'Waiting for event “approval”' }).waitFor();
    await expect(page.getByTestId('wait-info').textContent()).resolves.toMatch(/times out .* UTC \(in (9m|10m)/);
    await expect(page.getByTestId('execution-data').textContent()).resolves.toContain('"A-1001"');
    await expect(page.getByTestId('attempt').textContent()).resolves.toBe('1');
    const rows = page.getByTestId('timeline-entry');
    await expect(rows.count()).resolves.toBe(2);
    await expect(rows.nth(0).getAttribute('data-state')).resolves.toBe('completed');
    await expect(rows.nth(1).getAttribute('data-kind')).resolves.toBe('event');
    await expect(rows.nth(1).getAttribute('data-state')).resolves.toBe('waiting');
    // Its attempt is suspended, not running: its run time ends where the wait began, and stays there.
    const attempt = page.locator('[data-testid="attempt-row"][data-attempt="1"]');
    await expect(attempt.getAttribute('data-outcome')).resolves.toBe('suspended');
    await expect(attempt.locator('.status').textContent()).resolves.toBe('waiting');
    const [{ started_at: attemptStart }] = await t.client.listAttempts(ids.held);
    const wait = (await t.client.listSteps(ids.held)).find((s) => s.kind === 'event');
    const ran = formatDuration(Date.parse(wait?.started_at as string) - Date.parse(attemptStart as string));
    await expect(attempt.getByTestId('attempt-run-time').textContent()).resolves.toBe(ran);
    await expect(page.getByTestId('run-time').textContent()).resolves.toBe(ran);
  });

  it('offers the event form only once the task list has answered, with the skeleton of the awaited event', async () => {
    // Hold the task list: a form shown before it would name no schema, and replacing its payload when
    // the schema arrives could clobber what the operator had begun to type.
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const answered: Promise<void>[] = [];
    await page.route('**/api/v1/tasks', (route) => {
      const done = held.then(() => route.continue());
      answered.push(done);
      return done;
    });
    try {
      await page.reload();
      await page.getByTestId('wait-info').filter({ hasText: 'Waiting for event “approval”' }).waitFor();
      await expect(page.getByTestId('event-form').count()).resolves.toBe(0);
      release();
      await page.getByTestId('event-form').waitFor();
      // Nothing filled in that one click would send (`"approved": false` rejected the order): the
      // schema's shape as a placeholder, and the button off until the operator types.
      await expect(page.getByTestId('event-payload').inputValue()).resolves.toBe('');
      await expect(page.getByTestId('event-payload').getAttribute('placeholder')).resolves.toBe('{\n  "approved": <boolean>,\n  "approver": <string> (optional)\n}');
      await expect(page.getByTestId('send-event').isDisabled()).resolves.toBe(true);
      await expect(page.getByTestId('event-name').inputValue()).resolves.toBe('approval');
      await page.getByTestId('event-payload').fill('{}');
      await expect(page.getByTestId('send-event').isDisabled()).resolves.toBe(false);
      await page.getByTestId('event-payload').fill(' ');
      await expect(page.getByTestId('send-event').isDisabled()).resolves.toBe(true);
    } finally {
      release();
      await Promise.all(answered);
      await page.unroute('**/api/v1/tasks');
    }
  });

  it('checks an event payload against the task schema in the browser and does not send an invalid one', async () => {
    const editor = page.getByTestId('event-payload');
    await editor.fill('{"approved": "yes", "by": 1}');
    const problems = page.getByTestId('event-payload-problems');
    await problems.waitFor();
    await expect(problems.textContent()).resolves.toMatch(/\/approved.*boolean/);
    await page.getByTestId('send-event').click();
    await editor.fill('{"approved": tru');
    await problems.filter({ hasText: 'Not valid JSON' }).waitFor();
    await page.getByTestId('send-event').click();
    await screenshot('event-validation-error');
    await expect(t.client.get(ids.held).then((x) => x.status)).resolves.toBe('waiting');
  });

  it('delivers the event from the JSON editor and shows the execution complete with its timeline', async () => {
    await page.getByTestId('event-payload').fill('{"approved": true, "approver": "dana"}');
    await expect(page.getByTestId('event-payload-problems').count()).resolves.toBe(0);
    await page.getByTestId('send-event').click();
    await page.getByTestId('event-delivered').waitFor();
    await page.locator('[data-testid="execution-detail"][data-status="completed"]').waitFor({ timeout: 15_000 });
    // The form is gone with the waiting (the execution finished); the confirmation stays.
    await expect(page.getByTestId('event-form').count()).resolves.toBe(0);
    await expect(page.getByTestId('event-delivered').isVisible()).resolves.toBe(true);
    await expect(page.getByTestId('execution-output').textContent()).resolves.toContain('"approved": true');
    const rows = page.getByTestId('timeline-entry');
    await expect(rows.count()).resolves.toBe(3);
    await expect(rows.nth(1).textContent()).resolves.toContain('payload {"approved":true,"approver":"dana"}');
    await screenshot('execution-detail-timeline');
    await expect(t.client.get(ids.held)).resolves.toMatchObject({ status: 'completed', output: { orderId: 'A-1001', approved: true } });
  });

  it('shows the server error envelope when the server refuses an event', async () => {
    await page.goto(`${t.api.url}/ui#/executions/${ids.sleeping}`);
    await page.getByTestId('wait-info').filter({ hasText: 'Sleeping in “cool-off” until' }).waitFor();
    await page.getByTestId('event-payload').fill('{}');
    await page.getByTestId('send-event').click();
    const error = page.getByTestId('event-error');
    await error.waitFor();
    await expect(error.textContent()).resolves.toMatch(/not_waiting_for_event \(409\)/);
    await expect(error.textContent()).resolves.toMatch(/request id /);
  });

  it('cancels a sleeping execution from the detail page', async () => {
    await screenshot('execution-detail-sleeping');
    await page.getByTestId('cancel').click();
    await page.getByTestId('confirm-cancel').click();
    await page.locator('[data-testid="execution-detail"][data-status="cancelled"]').waitFor({ timeout: 15_000 });
    await page.getByTestId('execution-error').filter({ hasText: 'cancelled' }).waitFor();
    await expect(page.getByTestId('timeline-entry').nth(1).getAttribute('data-state')).resolves.toBe('interrupted');
    await expect(page.getByTestId('cancel').count()).resolves.toBe(0);
    await expect(t.client.get(ids.sleeping).then((x) => x.status)).resolves.toBe('cancelled');
    await screenshot('execution-cancelled');
  });

  it('lists tasks with counts by status and schedules an execution with checked JSON data', async () => {
    await page.goto(`${t.api.url}/ui#/tasks`);
    const card = page.getByTestId('task-ui-cooldown');
    await card.waitFor();
    await card.locator('a.count.status-text-cancelled', { hasText: /^1$/ }).waitFor();
    await card.locator('summary', { hasText: 'Schedule an execution' }).click();
    const editor = card.getByTestId('schedule-data');
    await editor.fill('{"minutes": 0}');
    await card.getByTestId('schedule-data-problems').filter({ hasText: '/minutes' }).waitFor();
    await editor.fill('{"minutes": 5}');
    await card.locator('button[type=submit]').click();
    await page.locator('[data-testid="execution-detail"][data-status="waiting"]').waitFor({ timeout: 15_000 });
    const id = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
    await expect(t.client.get(id)).resolves.toMatchObject({ task: 'ui-cooldown', data: { minutes: 5 } });
    await page.goto(`${t.api.url}/ui#/tasks`);
    await page.getByTestId('task-ui-approval').waitFor();
    // A task with a cron schedule says so, with its next fire time (Tokyo's midnight is 15:00 UTC the day before).
    const thisYear = new Date().getUTCFullYear();
    const year = Date.now() < Date.UTC(thisYear, 11, 31, 15) ? thisYear : thisYear + 1;
    const nextNewYear = `${year}-12-31 15:00:00 UTC`;
    await expect(page.getByTestId('task-ui-new-year').getByTestId('task-cron').textContent()).resolves.toBe(
      `Runs on 0 0 1 1 * (Asia/Tokyo); next ${nextNewYear}`,
    );
    await expect(page.getByTestId('task-ui-new-year').getByTestId('task-limits').textContent()).resolves.toBe('Limits: 1 at once');
    await expect(page.getByTestId('task-ui-new-year').getByTestId('task-keys').count()).resolves.toBe(0);
    await expect(page.getByTestId('task-ui-quick').getByTestId('task-cron').count()).resolves.toBe(0);
    await expect(page.getByTestId('task-ui-quick').getByTestId('task-limits').count()).resolves.toBe(0);
    await screenshot('tasks');
    await page.goto(`${t.api.url}/ui#/executions`);
    await rowStatus(id).filter({ hasText: 'waiting' }).waitFor();
    await expect(page.getByTestId('page-info').textContent()).resolves.toBe('1–5 of 5');
    await screenshot('dashboard-list');
  });

  it('schedules an execution to start later from the task form, and its page says when it will start', async () => {
    await page.goto(`${t.api.url}/ui#/tasks`);
    const card = page.getByTestId('task-ui-quick');
    await card.locator('summary', { hasText: 'Schedule an execution' }).click();
    // The input takes the zone chosen in the header, UTC until the operator picks local: the same
    // minute, one hour ahead, in UTC (the browser's own zone is five and a half hours off).
    const start = new Date(Date.now() + 3_600_000);
    start.setUTCSeconds(0, 0);
    const iso = start.toISOString();
    await card.getByTestId('schedule-start-at').fill(iso.slice(0, 16));
    await card.locator('button[type=submit]').click();
    await page.locator('[data-testid="execution-detail"][data-status="pending"]').waitFor({ timeout: 15_000 });
    const shown = `${iso.slice(0, 19).replace('T', ' ')} UTC`;
    await expect(page.getByTestId('start-at').textContent()).resolves.toBe(shown);
    await expect(page.getByTestId('wait-info').textContent()).resolves.toMatch(new RegExp(`^Scheduled to start ${shown} \\(in 5[89]m `));
    const id = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
    await expect(t.client.get(id)).resolves.toMatchObject({ task: 'ui-quick', status: 'pending', start_at: iso, started_at: null });
    await screenshot('execution-scheduled-later');
    await t.client.cancel(id);
  });

  it('links a parent waiting for its child to the child, and back', async () => {
    const { execution_id: parentId } = await t.client.schedule('ui-parent');
    await waitUntil(async () => (await t.client.list({ parent_execution_id: parentId })).total === 1, 'the child to be started');
    const childId = (await t.client.list({ parent_execution_id: parentId })).executions[0].execution_id;
    await page.goto(`${t.api.url}/ui#/executions/${parentId}`);
    await page.getByTestId('wait-info').filter({ hasText: `Waiting in “through-gate” for child execution ${childId} to finish.` }).waitFor({ timeout: 15_000 });
    await expect(page.getByTestId('children-section').locator('tr[data-execution-id]').count()).resolves.toBe(1);
    await screenshot('execution-parent-waiting');
    await page.getByTestId('children-section').locator('a.mono').click();
    await page.locator('h1', { hasText: childId }).waitFor();
    await expect(page.getByTestId('parent-link').textContent()).resolves.toBe(parentId);
    await t.client.sendEvent(childId, 'open', null);
    await page.getByTestId('parent-link').click();
    await page.locator('[data-testid="execution-detail"][data-status="completed"]').waitFor({ timeout: 15_000 });
    await page.locator(`[data-testid="children-section"] tr[data-execution-id="${childId}"][data-status="completed"]`).waitFor({ timeout: 15_000 });
    await expect(page.getByTestId('execution-output').textContent()).resolves.toContain('opened');
    // The list, filtered to the parent's children.
    await page.goto(`${t.api.url}/ui#/executions?parent=${parentId}`);
    await page.getByTestId('filter-parent').filter({ hasText: parentId }).waitFor();
    await page.locator(`tr[data-execution-id="${childId}"]`).waitFor();
    await expect(page.getByTestId('page-info').textContent()).resolves.toBe('1–1 of 1');
  });

  it('renders the API reference from the served openapi.yaml, linked from the dashboard', async () => {
    await page.goto(`${t.api.url}/ui`);
    const specRequest = page.waitForResponse((r) => r.url() === `${t.api.url}/api/v1/openapi.yaml`);
    await page.getByTestId('docs-link').click();
    expect((await specRequest).status()).toBe(200);
    await page.locator('.opblock').first().waitFor();
    const operations = await page.locator('.opblock .opblock-summary-path').allTextContents();
    for (const p of ['/api/v1/executions', '/api/v1/executions/{id}/cancel', '/api/v1/events/{id}/{event_name}', '/api/v1/tasks']) {
      expect(operations.map((o) => o.replace(/\u200b/g, ''))).toContain(p);
    }
    await expect(page.locator('.opblock').count()).resolves.toBe(getSpec().operations.size);
    await expect(page.locator('.servers select').inputValue()).resolves.toBe(t.api.url);
    await screenshot('api-reference');
  });

  it('warns on a task that no live worker serves, on the tasks page and on its pending execution, and lists the workers', async () => {
    // Registered as an earlier worker would have left it, with no worker serving it now.
    await registerTask(t.db, 'ui-orphan');
    const { execution_id: orphanId } = await t.client.schedule('ui-orphan');
    await page.goto(`${t.api.url}/ui#/tasks`);
    const orphan = page.getByTestId('task-ui-orphan');
    await orphan.getByTestId('no-worker-warning').waitFor();
    await expect(orphan.getByTestId('no-worker-warning').textContent()).resolves.toBe('No worker serves this task: its executions stay pending until one that serves it starts.');
    await expect(orphan.getByTestId('task-workers').textContent()).resolves.toBe('0 live workers serve this task.');
    const served = page.getByTestId('task-ui-quick');
    await expect(served.getByTestId('task-workers').textContent()).resolves.toBe('1 live worker serves this task.');
    await expect(served.getByTestId('no-worker-warning').count()).resolves.toBe(0);
    await orphan.scrollIntoViewIfNeeded();
    await screenshot('tasks-no-worker');

    await page.goto(`${t.api.url}/ui#/executions/${orphanId}`);
    await page.locator('[data-testid="execution-detail"][data-status="pending"]').waitFor();
    await page.getByTestId('no-worker-warning').filter({ hasText: 'No worker serves task “ui-orphan”: it stays pending until one that serves it starts.' }).waitFor();
    await screenshot('execution-no-worker');
    // A waiting execution of a served task carries no such warning.
    const { execution_id: sleepingId } = await t.client.schedule('ui-cooldown', { minutes: 30 });
    await page.goto(`${t.api.url}/ui#/executions/${sleepingId}`);
    await page.getByTestId('wait-info').filter({ hasText: 'Sleeping in “cool-off” until' }).waitFor({ timeout: 15_000 });
    // The event form shows once the task list has answered: the warning would have shown by then.
    await page.getByTestId('event-form').waitFor();
    await expect(page.getByTestId('no-worker-warning').count()).resolves.toBe(0);

    await page.goto(`${t.api.url}/ui#/workers`);
    const row = page.locator(`tr[data-worker-id="${worker.id}"]`);
    await row.waitFor();
    await expect(row.getAttribute('data-state')).resolves.toBe('active');
    await expect(row.locator('.status').textContent()).resolves.toBe('active');
    await expect(row.textContent()).resolves.toContain('ui-approval, ui-cooldown, ui-doomed, ui-flaky, ui-gate, ui-new-year, ui-parent, ui-quick');
    await expect(row.getByTestId('worker-running').textContent()).resolves.toMatch(/^\d+ \/ 8$/);
    await screenshot('workers');
    await t.client.cancel(orphanId);
    await t.client.cancel(sleepingId);
  });

  it('reads an execution’s steps and attempts only once its state has come, so they are never older than it', async () => {
    // Read together, steps could be read before a sleep began and the state after: the page would
    // show a sleep without its deadline, and the stream, whose next event matches that state, would
    // not reload it.
    const { execution_id: id } = await t.client.schedule('ui-quick');
    await waitUntil(async () => (await t.client.get(id)).status === 'completed', 'the quick execution to complete');
    const executionUrl = `${t.api.url}/api/v1/executions/${id}`;
    const seen: string[] = [];
    const onRequest = (req: { url(): string }) => {
      const [url] = req.url().split('?');
      for (const part of ['steps', 'attempts']) if (url === `${executionUrl}/${part}`) seen.push(part);
    };
    page.on('request', onRequest);
    await page.route(executionUrl, async (route) => {
      seen.push('execution held');
      await new Promise((resolve) => setTimeout(resolve, 300));
      seen.push('execution answered');
      await route.continue();
    });
    try {
      await page.goto(`${t.api.url}/ui#/executions/${id}`);
      await page.locator('[data-testid="execution-detail"][data-status="completed"]').waitFor();
      const answered = seen.indexOf('execution answered');
      expect(answered).toBeGreaterThan(0);
      expect(seen.indexOf('steps')).toBeGreaterThan(answered);
      expect(seen.indexOf('attempts')).toBeGreaterThan(answered);
    } finally {
      page.off('request', onRequest);
      await page.unroute(executionUrl);
    }
  });

  it("lists a failed execution's attempts with the error and a folded stack, and retries it from the page", async () => {
    const { execution_id: id } = await t.client.schedule('ui-flaky', {}, { idempotencyKey: 'order-A-2002-charge', tags: ['checkout', 'eu'] });
    await waitUntil(async () => (await t.client.get(id)).status === 'failed', 'the charge to fail');
    await page.goto(`${t.api.url}/ui#/executions/${id}`);
    const section = page.getByTestId('attempts-section');
    const first = section.locator('[data-testid="attempt-row"][data-attempt="1"]');
    await first.waitFor();
    await expect(section.getByTestId('attempt-row').count()).resolves.toBe(1);
    await expect(first.getAttribute('data-outcome')).resolves.toBe('failed');
    await expect(first.locator('.status').textContent()).resolves.toBe('failed');
    await expect(first.getByTestId('attempt-error-message').textContent()).resolves.toBe('step "charge" failed: payment gateway timed out');
    await expect(first.locator('a.mono').getAttribute('title')).resolves.toBe(worker.id);
    // The stack is there, folded: shown only once the operator opens it.
    const stack = first.getByTestId('attempt-stack');
    await expect(stack.getAttribute('open')).resolves.toBeNull();
    await expect(stack.locator('pre').isVisible()).resolves.toBe(false);
    await stack.locator('summary').click();
    await expect(stack.locator('pre').isVisible()).resolves.toBe(true);
    await expect(stack.locator('pre').textContent()).resolves.toMatch(/payment gateway timed out\n\s+at /);
    await expect(page.getByTestId('idempotency-key').textContent()).resolves.toBe('order-A-2002-charge');
    await expect(page.getByTestId('tags').textContent()).resolves.toBe('checkouteu');
    await page.getByTestId('retry').waitFor();
    // The step that failed is red and says so, its error at hand: in the row's tooltip and under it.
    const charge = page.locator('[data-testid="timeline-entry"][data-kind="step"]').nth(1);
    await expect(charge.getAttribute('data-state')).resolves.toBe('failed');
    await expect(charge.locator('.tl-duration em').textContent()).resolves.toBe(' failed');
    await expect(charge.locator('.tl-bar').evaluate((el) => getComputedStyle(el).backgroundColor)).resolves.toBe('rgb(198, 47, 59)');
    await expect(charge.getAttribute('title')).resolves.toBe('Failed: payment gateway timed out');
    await expect(charge.getByTestId('timeline-error-message').textContent()).resolves.toBe('NonRetryableError: payment gateway timed out');
    await charge.getByTestId('timeline-error').locator('summary').click();
    await expect(charge.getByTestId('timeline-error').locator('pre').textContent()).resolves.toBe('payment gateway timed out');
    await screenshot('execution-attempts');

    // As if the operator came back ten minutes later: the first attempt, and the execution's start, ten minutes back.
    await t.db.raw(`UPDATE stepwise.attempts SET started_at = started_at - interval '10 minutes', ended_at = ended_at - interval '10 minutes' WHERE execution_id = ?`, [id]);
    await t.db.raw(
      `UPDATE stepwise.executions SET created_at = created_at - interval '10 minutes', started_at = started_at - interval '10 minutes', completed_at = completed_at - interval '10 minutes' WHERE id = ?`,
      [id],
    );
    await page.reload();
    await page.locator('[data-testid="execution-detail"][data-status="failed"]').waitFor();
    paymentsMended = true;
    await page.getByTestId('retry').click();
    await page.locator('[data-testid="execution-detail"][data-status="completed"]').waitFor({ timeout: 15_000 });
    await section.locator('[data-testid="attempt-row"][data-attempt="2"][data-outcome="completed"]').waitFor();
    // Run time is the attempts' own (no step waits here: each attempt's span), the ten minutes between them waiting.
    const [attempts, finished] = await Promise.all([t.client.listAttempts(id), t.client.get(id)]);
    const spans = attempts.map((a) => Date.parse(a.ended_at as string) - Date.parse(a.started_at as string));
    const ran = spans.reduce((a, b) => a + b, 0);
    const elapsed = Date.parse(finished.completed_at as string) - Date.parse(finished.started_at as string);
    expect(elapsed).toBeGreaterThan(10 * 60_000);
    await expect(page.getByTestId('run-time').textContent()).resolves.toBe(formatDuration(ran));
    await expect(page.getByTestId('wait-time').textContent()).resolves.toBe(formatDuration(elapsed - ran));
    await expect(page.getByTestId('wait-time').textContent()).resolves.toMatch(/^10m \d\ds$/);
    await expect(section.getByTestId('attempt-run-time').allTextContents()).resolves.toEqual(spans.map(formatDuration));
    await expect(page.getByTestId('retry').count()).resolves.toBe(0);
    await expect(page.getByTestId('retry-error').count()).resolves.toBe(0);
    await expect(t.client.get(id)).resolves.toMatchObject({ status: 'completed', output: { charged: true } });
    await expect(t.client.listAttempts(id).then((a) => a.map((x) => x.outcome))).resolves.toEqual(['failed', 'completed']);
  });

  it('shows the refusal when the execution moved on before Retry was clicked, and the page catches up', async () => {
    // Cancelled above; a finished execution's page stops refreshing, so it still offers Retry after
    // another operator has retried it through the API.
    await page.goto(`${t.api.url}/ui#/executions/${ids.sleeping}`);
    await page.locator('[data-testid="execution-detail"][data-status="cancelled"]').waitFor();
    await page.getByTestId('retry').waitFor();
    await t.client.retry(ids.sleeping);
    await waitUntil(async () => (await t.client.get(ids.sleeping)).status === 'waiting', 'the retried execution to sleep again');
    await page.getByTestId('retry').click();
    const refusal = page.getByTestId('retry-error');
    await refusal.waitFor();
    await expect(refusal.textContent()).resolves.toMatch(/^execution_not_retryable \(409\): .*waiting/);
    await page.locator('[data-testid="execution-detail"][data-status="waiting"]').waitFor();
    await expect(refusal.isVisible()).resolves.toBe(true);
    await expect(page.getByTestId('retry').count()).resolves.toBe(0);
    await t.client.cancel(ids.sleeping);
  });

  it('finds an execution by idempotency key, by a UUID used as a key, and by id', async () => {
    const keyed = await t.client.schedule('ui-quick', {}, { idempotencyKey: 'order-ord_777-charge' });
    const uuidKey = randomUUID();
    const uuidKeyed = await t.client.schedule('ui-quick', {}, { idempotencyKey: uuidKey });
    await page.goto(`${t.api.url}/ui#/executions?status=completed`);
    await page.getByTestId('executions-table').waitFor();
    const search = page.getByTestId('search-input');

    await search.fill('order-ord_777-charge');
    await page.getByTestId('search-submit').click();
    await page.getByTestId('filter-key').filter({ hasText: 'order-ord_777-charge' }).waitFor();
    // A key names at most one execution: the status filter would only hide it.
    expect(new URL(page.url()).hash).toBe('#/executions?idempotency_key=order-ord_777-charge');
    await page.locator(`tr[data-execution-id="${keyed.execution_id}"]`).waitFor();
    await expect(page.getByTestId('page-info').textContent()).resolves.toBe('1–1 of 1');
    // Bulk actions cannot be limited to a key: offered, they would reach other executions.
    await expect(page.getByTestId('bulk-cancel').isDisabled()).resolves.toBe(true);
    await expect(page.getByTestId('bulk-retry').isDisabled()).resolves.toBe(true);

    // No execution has this UUID as its id: it is looked up as a key.
    await search.fill(uuidKey);
    await page.getByTestId('search-submit').click();
    await page.locator(`tr[data-execution-id="${uuidKeyed.execution_id}"]`).waitFor();
    await expect(page.getByTestId('filter-key').textContent()).resolves.toContain(uuidKey);
    await expect(page.locator('tr[data-execution-id]').count()).resolves.toBe(1);

    await search.fill(` ${keyed.execution_id.toUpperCase()} `);
    await page.getByTestId('search-submit').click();
    await page.locator('h1', { hasText: keyed.execution_id }).waitFor();
    expect(new URL(page.url()).hash).toBe(`#/executions/${keyed.execution_id}`);
    await expect(page.getByTestId('idempotency-key').textContent()).resolves.toBe('order-ord_777-charge');
  });

  it('filters by tags and creation time, and retries every failed match after a confirmation naming the count', async () => {
    const tagged = await Promise.all([1, 2, 3].map(() => t.client.schedule('ui-doomed', {}, { tags: ['batch-7', 'eu'] })));
    const completed = await t.client.schedule('ui-quick', {}, { tags: ['batch-7'] });
    const untagged = await t.client.schedule('ui-doomed');
    const all = [...tagged.map((x) => x.execution_id), untagged.execution_id];
    await waitUntil(async () => (await Promise.all(all.map((id) => t.client.get(id)))).every((x) => x.status === 'failed'), 'the batch to fail');
    await waitUntil(async () => (await t.client.get(completed.execution_id)).status === 'completed', 'the tagged quick one to complete');

    await page.goto(`${t.api.url}/ui#/executions`);
    const tags = page.getByTestId('filter-tags');
    await tags.fill('batch-7');
    await tags.press('Enter');
    await page.getByTestId('page-info').filter({ hasText: '1–4 of 4' }).waitFor();
    expect(new URL(page.url()).hash).toBe('#/executions?tag=batch-7');
    await expect(page.locator(`tr[data-execution-id="${untagged.execution_id}"]`).count()).resolves.toBe(0);
    // Every one of the tags given.
    await tags.fill('batch-7, eu');
    await tags.press('Enter');
    await page.getByTestId('page-info').filter({ hasText: '1–3 of 3' }).waitFor();
    expect(new URL(page.url()).hash).toBe('#/executions?tag=batch-7&tag=eu');
    await tags.fill('batch-7');
    await tags.press('Enter');
    await page.getByTestId('page-info').filter({ hasText: '1–4 of 4' }).waitFor();

    // Created from two minutes ahead: nothing yet, and nothing to retry.
    const after = page.getByTestId('filter-created-after');
    const future = utcMinute(2);
    await after.fill(future);
    await page.getByTestId('page-info').filter({ hasText: '0–0 of 0' }).waitFor();
    expect(new URL(page.url()).hash).toBe(`#/executions?tag=batch-7&created_after=${encodeURIComponent(`${future}:00Z`)}`);
    await page.getByTestId('bulk-retry').click();
    await page.getByTestId('bulk-nothing').filter({ hasText: 'No failed or cancelled execution matches this filter: nothing to retry.' }).waitFor();
    await expect(page.getByTestId('bulk-confirm').count()).resolves.toBe(0);
    // Created from ten minutes ago: the batch again.
    await after.fill(utcMinute(-10));
    await page.getByTestId('page-info').filter({ hasText: '1–4 of 4' }).waitFor();

    // Of the four matching, three are failed: the question counts those the action takes.
    await page.getByTestId('bulk-retry').click();
    const confirm = page.getByTestId('bulk-confirm');
    await confirm.waitFor();
    await expect(confirm.locator('strong').textContent()).resolves.toBe('Retry 3 failed or cancelled executions matching this filter?');
    await screenshot('dashboard-operate');
    await page.getByTestId('bulk-confirm-yes').click();
    const result = page.getByTestId('bulk-result');
    await result.waitFor();
    await expect(result.textContent()).resolves.toBe('Retried 3 of 3 matching executions.');
    await expect(result.getAttribute('data-matched')).resolves.toBe('3');
    await expect(result.getAttribute('data-changed')).resolves.toBe('3');
    await expect(confirm.count()).resolves.toBe(0);
    // Each ran again (and, doomed, failed again); what the filter left out was not touched.
    for (const { execution_id: id } of tagged) {
      await waitUntil(async () => (await t.client.listAttempts(id)).length === 2 && (await t.client.get(id)).status === 'failed', `${id} to be retried`);
    }
    await expect(t.client.listAttempts(untagged.execution_id).then((a) => a.length)).resolves.toBe(1);
    await expect(t.client.get(completed.execution_id).then((x) => x.status)).resolves.toBe('completed');
  });

  it('cancels every waiting match after confirming, and offers no action the status filter rules out', async () => {
    const sleepers = await Promise.all([1, 2].map(() => t.client.schedule('ui-cooldown', { minutes: 30 }, { tags: ['batch-c'] })));
    const ids2 = sleepers.map((x) => x.execution_id);
    await waitUntil(async () => (await Promise.all(ids2.map((id) => t.client.get(id)))).every((x) => x.status === 'waiting'), 'the sleepers to sleep');
    await page.goto(`${t.api.url}/ui#/executions?status=waiting&tag=batch-c`);
    await page.getByTestId('page-info').filter({ hasText: '1–2 of 2' }).waitFor();
    await expect(page.getByTestId('bulk-retry').isDisabled()).resolves.toBe(true);
    await expect(page.getByTestId('bulk-retry').getAttribute('title')).resolves.toBe('Only failed or cancelled executions can be retried.');
    await page.getByTestId('bulk-cancel').click();
    await expect(page.getByTestId('bulk-confirm').locator('strong').textContent()).resolves.toBe('Cancel 2 waiting executions matching this filter?');
    await page.getByTestId('bulk-confirm-yes').click();
    await page.getByTestId('bulk-result').filter({ hasText: 'Cancelled 2 of 2 matching executions.' }).waitFor();
    await page.getByTestId('page-info').filter({ hasText: '0–0 of 0' }).waitFor();
    await expect(Promise.all(ids2.map((id) => t.client.get(id).then((x) => x.status)))).resolves.toEqual(['cancelled', 'cancelled']);
  });

  it('pauses and resumes a task from the tasks page; a paused task leaves its executions pending', async () => {
    await page.goto(`${t.api.url}/ui#/tasks`);
    const card = page.getByTestId('task-ui-quick');
    await card.locator('[data-testid="pause-toggle"][data-paused="false"]').click();
    await card.getByTestId('paused-badge').waitFor();
    await expect(card.getByTestId('pause-toggle').textContent()).resolves.toBe('Resume');
    await expect(card.getByTestId('paused-note').isVisible()).resolves.toBe(true);
    await expect(t.client.listTasks().then((ts) => ts.find((x) => x.name === 'ui-quick')?.paused)).resolves.toBe(true);
    await expect(page.getByTestId('task-ui-cooldown').getByTestId('paused-badge').count()).resolves.toBe(0);
    await screenshot('tasks-paused');

    const { execution_id: held } = await t.client.schedule('ui-quick');
    await page.goto(`${t.api.url}/ui#/executions/${held}`);
    await page.getByTestId('paused-warning').filter({ hasText: 'Task “ui-quick” is paused: it stays pending until the task is resumed' }).waitFor();
    await expect(page.locator('[data-testid="execution-detail"]').getAttribute('data-status')).resolves.toBe('pending');

    await page.goto(`${t.api.url}/ui#/tasks`);
    await card.locator('[data-testid="pause-toggle"][data-paused="true"]').click();
    await card.locator('[data-testid="pause-toggle"][data-paused="false"]').waitFor();
    await expect(card.getByTestId('paused-badge').count()).resolves.toBe(0);
    await expect(t.client.listTasks().then((ts) => ts.find((x) => x.name === 'ui-quick')?.paused)).resolves.toBe(false);
    await expect(t.client.wait(held, { deadlineMs: 15_000 }).then((x) => x.status)).resolves.toBe('completed');
  });

  it('switches every time shown, and the dates typed, between UTC and local time, and remembers the choice', async () => {
    const x = await t.client.get(ids.quick);
    const attempt = (await t.client.listAttempts(ids.quick))[0];
    await page.goto(`${t.api.url}/ui#/executions/${ids.quick}`);
    const created = page.getByTestId('created-at');
    const attemptStarted = page.locator('[data-testid="attempt-row"][data-attempt="1"] time').first();
    await created.filter({ hasText: shown(x.created_at, 'utc') }).waitFor();
    await expect(attemptStarted.textContent()).resolves.toBe(shown(attempt.started_at!, 'utc'));
    await expect(page.getByTestId('time-zone').inputValue()).resolves.toBe('utc');

    await page.getByTestId('time-zone').selectOption('local');
    await created.filter({ hasText: shown(x.created_at, 'local') }).waitFor();
    await expect(attemptStarted.textContent()).resolves.toBe(shown(attempt.started_at!, 'local'));
    // Named as the browser names it (Chromium's ICU says Asia/Calcutta).
    const zoneName = await page.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone);
    expect(zoneName).toMatch(/^Asia\/(Kolkata|Calcutta)$/);
    await expect(page.getByTestId('time-zone').locator('option:checked').textContent()).resolves.toBe(`Local (${zoneName})`);
    await expect(page.evaluate(() => localStorage.getItem('stepwise.timeZone'))).resolves.toBe('local');

    // Remembered across a reload, and used by the list too (its tooltips) and by the dates typed there.
    await page.goto(`${t.api.url}/ui#/executions?limit=100`);
    await page.reload();
    await expect(page.getByTestId('time-zone').inputValue()).resolves.toBe('local');
    const row = page.locator(`tr[data-execution-id="${ids.quick}"] time`).first();
    await row.waitFor();
    await expect(row.getAttribute('title')).resolves.toBe(shown(x.created_at, 'local'));
    const after = page.getByTestId('filter-created-after');
    await after.fill('2024-10-30T17:30');
    await page.waitForURL((url) => url.hash.includes('created_after='));
    expect(new URL(page.url()).hash).toBe(`#/executions?created_after=${encodeURIComponent('2024-10-30T12:00:00Z')}&limit=100`);
    await expect(page.getByTestId('filter-zone').textContent()).resolves.toBe(zoneName);

    await page.getByTestId('time-zone').selectOption('utc');
    await expect(after.inputValue()).resolves.toBe('2024-10-30T12:00');
    await expect(row.getAttribute('title')).resolves.toBe(shown(x.created_at, 'utc'));
    await expect(page.evaluate(() => localStorage.getItem('stepwise.timeZone'))).resolves.toBe('utc');
  });

  it('follows an open execution over its stream: a change made elsewhere shows without a reload or polling', async () => {
    const { execution_id: id } = await t.client.schedule('ui-approval', { orderId: 'A-1003' });
    await waitUntil(async () => (await t.client.get(id)).status === 'waiting', 'the execution to wait for its approval');
    const streamed = page.waitForRequest((r) => r.url() === `${t.api.url}/api/v1/executions/${id}/stream`);
    await page.goto(`${t.api.url}/ui#/executions/${id}`);
    await page.locator('[data-testid="execution-detail"][data-status="waiting"]').waitFor();
    const request = await streamed;
    expect(await request.headerValue('authorization')).toBe(`Bearer ${TOKEN}`);
    // Delivered by another client: only the stream can tell the page (it no longer polls the execution).
    await t.client.sendEvent(id, 'approval', { approved: false });
    await page.locator('[data-testid="execution-detail"][data-status="completed"]').waitFor({ timeout: 15_000 });
    await expect(page.getByTestId('execution-output').textContent()).resolves.toContain('"approved": false');
    await expect(page.getByTestId('timeline-entry').count()).resolves.toBe(3);
  });

  it("shows a task's limits in plain words and, per key, what runs, what waits and what started in the window", async () => {
    const scheduled: Record<string, string[]> = { acme: [], globex: [] };
    for (const tenant of ['acme', 'acme', 'acme', 'globex', 'globex']) {
      scheduled[tenant].push((await t.client.schedule('ui-tenant-sync', { tenant })).execution_id);
    }
    const counts = async (k: string) => (await t.client.listTasks()).find((x) => x.name === 'ui-tenant-sync')?.keys.find((x) => x.key === k);
    await waitUntil(async () => {
      const [acme, globex] = await Promise.all([counts('acme'), counts('globex')]);
      return acme?.running === 1 && acme.waiting === 2 && globex?.running === 1 && globex.waiting === 1;
    }, 'one execution of each tenant to run, the others to wait');

    await page.goto(`${t.api.url}/ui#/tasks`);
    const card = page.getByTestId('task-ui-tenant-sync');
    await card.getByTestId('task-keys').waitFor();
    await expect(card.getByTestId('task-limit').allTextContents()).resolves.toEqual(['1 at once per /tenant', '100 per 1m per /tenant']);
    await expect(card.locator('[data-testid="task-keys"] th').allTextContents()).resolves.toEqual(['Key', 'Running', 'Waiting', 'Started (last 1m)']);
    // Most waiting first.
    await expect(card.getByTestId('task-key').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-key')))).resolves.toEqual(['acme', 'globex']);
    const cells = (k: string) => card.locator(`[data-testid="task-key"][data-key="${k}"] td`).allTextContents();
    await expect(cells('acme')).resolves.toEqual(['acme', '1', '2', '1']);
    await expect(cells('globex')).resolves.toEqual(['globex', '1', '1', '1']);
    await card.scrollIntoViewIfNeeded();
    await screenshot('tasks-flow-control');

    // An execution of a keyed task names its key.
    const running = (await Promise.all(scheduled.acme.map((id) => t.client.get(id)))).find((x) => x.status === 'running');
    expect(running).toBeDefined();
    await page.goto(`${t.api.url}/ui#/executions/${running?.execution_id}`);
    await page.getByTestId('concurrency-key').filter({ hasText: 'acme' }).waitFor();
    await expect(page.getByTestId('priority').textContent()).resolves.toBe('0');

    releaseTenants();
    const all = [...scheduled.acme, ...scheduled.globex];
    await waitUntil(async () => (await Promise.all(all.map((id) => t.client.get(id)))).every((x) => x.status === 'completed'), 'every tenant sync to complete', 30_000);
    // Nothing runs or waits any more: the key table goes, the limits stay.
    await page.goto(`${t.api.url}/ui#/tasks`);
    await card.getByTestId('task-limits').waitFor();
    await expect(card.getByTestId('task-keys').count()).resolves.toBe(0);
  });

  it('shows the priority of every execution in the list, a non-zero one standing out, and on its page', async () => {
    const urgent = await t.client.schedule('ui-quick', {}, { priority: 5, tags: ['prio'] });
    const plain = await t.client.schedule('ui-quick', {}, { tags: ['prio'] });
    await page.goto(`${t.api.url}/ui#/executions?tag=prio`);
    await page.getByTestId('page-info').filter({ hasText: '1–2 of 2' }).waitFor();
    await expect(page.locator('[data-testid="executions-table"] th').allTextContents()).resolves.toContain('Priority');
    const priority = (id: string) => page.locator(`tr[data-execution-id="${id}"] [data-testid="row-priority"]`);
    await expect(priority(urgent.execution_id).textContent()).resolves.toBe('5');
    await expect(priority(urgent.execution_id).locator('.priority-high').count()).resolves.toBe(1);
    await expect(priority(plain.execution_id).textContent()).resolves.toBe('0');
    await expect(priority(plain.execution_id).locator('.priority').count()).resolves.toBe(0);
    await screenshot('executions-priority');
    await openExecution(urgent.execution_id);
    await expect(page.getByTestId('priority').textContent()).resolves.toBe('5');
    // Its task has no keyed limit: no concurrency key to show.
    await expect(page.getByTestId('concurrency-key').count()).resolves.toBe(0);
    await expect(t.client.get(urgent.execution_id)).resolves.toMatchObject({ priority: 5, concurrency_key: null });
  });

  it('charts the executions created, completed and failed per minute over the last hour, on the list and on each task', async () => {
    type Totals = { created: number; completed: number; failed: number };
    const fromApi = async (task?: string): Promise<Totals> => {
      const { buckets } = await t.client.throughput(task === undefined ? {} : { task });
      return { created: buckets.reduce((n, b) => n + b.created, 0), completed: buckets.reduce((n, b) => n + b.completed, 0), failed: buckets.reduce((n, b) => n + b.failed, 0) };
    };
    const shownIn = async (chart: ReturnType<Page['getByTestId']>): Promise<Totals> => {
      await chart.and(page.locator('[data-loaded="true"]')).waitFor();
      const total = async (key: string) => Number(await chart.getByTestId(`throughput-total-${key}`).getAttribute('data-total'));
      return { created: await total('created'), completed: await total('completed'), failed: await total('failed') };
    };
    // Workers may still finish something between the two reads: load the page again until they agree.
    const agree = async (hash: string, chart: () => ReturnType<Page['getByTestId']>, task?: string) => {
      await waitUntil(async () => {
        await page.goto(`${t.api.url}/ui${hash}`);
        await page.reload();
        const shown = await shownIn(chart());
        return JSON.stringify(shown) === JSON.stringify(await fromApi(task));
      }, 'the chart to show what the API counts');
    };

    await agree('#/executions', () => page.getByTestId('throughput-chart'));
    const chart = page.getByTestId('throughput-chart');
    const totals = await shownIn(chart);
    expect(totals.created).toBeGreaterThan(20);
    expect(totals.completed).toBeGreaterThan(5);
    expect(totals.failed).toBeGreaterThan(3);
    // Accessible: an image named by its title, described by its totals, and a table to open.
    const svg = chart.getByTestId('throughput-svg');
    await expect(svg.getAttribute('role')).resolves.toBe('img');
    const [titleId, descId] = ((await svg.getAttribute('aria-labelledby')) as string).split(' ');
    await expect(page.locator(`[id="${titleId}"]`).textContent()).resolves.toBe('Executions per minute, last hour');
    await expect(page.locator(`[id="${descId}"]`).textContent()).resolves.toMatch(
      new RegExp(`^In the last hour: ${totals.created} created, ${totals.completed} completed, ${totals.failed} failed; the busiest minute began .* UTC\\.$`),
    );
    await expect(svg.locator('g[data-series="failed"] rect').count()).resolves.toBeGreaterThan(0);
    await chart.locator('summary', { hasText: 'As a table' }).click();
    const rows = chart.getByTestId('throughput-table').locator('tbody tr');
    await expect(rows.count()).resolves.toBeGreaterThan(0);
    const cells = await rows.evaluateAll((trs) => trs.map((tr) => Array.from(tr.querySelectorAll('td')).slice(1).map((td) => Number(td.textContent))));
    expect(cells.reduce((sum, [c, d, f]) => ({ created: sum.created + c, completed: sum.completed + d, failed: sum.failed + f }), { created: 0, completed: 0, failed: 0 })).toEqual(totals);

    // On the tasks page, each card charts its own task.
    await agree('#/tasks', () => page.getByTestId('task-ui-doomed').getByTestId('throughput-chart'), 'ui-doomed');
    const doomed = await shownIn(page.getByTestId('task-ui-doomed').getByTestId('throughput-chart'));
    expect(doomed).toEqual({ created: expect.any(Number), completed: 0, failed: doomed.created });
    expect(doomed.failed).toBeGreaterThan(0);
  });

  it('fits a phone, a small laptop and a wide screen without scrolling sideways', async () => {
    const { execution_id: flakyId } = (await t.client.list({ task: 'ui-flaky', limit: 1 })).executions[0];
    const pages = ['#/executions', `#/executions/${flakyId}`, `#/executions/${ids.held}`, '#/tasks', '#/workers', '#/webhooks'];
    try {
      for (const [width, height] of [[390, 844], [800, 760], [1400, 760]]) {
        await page.setViewportSize({ width, height });
        for (const hash of pages) {
          await page.goto(`${t.api.url}/ui${hash}`);
          await page.locator('main h1').first().waitFor();
          await page.locator('main :is([data-testid="executions-table"], [data-testid="execution-detail"] [data-testid="attempts-section"], .task-grid > section, [data-testid="workers-table"], [data-testid="webhooks-table"])').first().waitFor();
          const fits = await page.evaluate(() => ({ scroll: (document.scrollingElement as Element).scrollWidth, inner: innerWidth }));
          expect({ width, hash, fits: fits.scroll <= fits.inner }).toEqual({ width, hash, fits: true });
        }
        await page.goto(`${t.api.url}/ui#/executions`);
        await page.getByTestId('executions-table').waitFor();
        await page.locator('[data-testid="throughput-chart"][data-loaded="true"]').waitFor();
        const file = path.join(DOCS_IMAGES, `dashboard-${width}.png`);
        await page.screenshot({ path: file });
        expect(statSync(file).size).toBeLessThan(200 * 1024);
      }
    } finally {
      await page.setViewportSize({ width: 1360, height: 900 });
    }
  });
});

describe('the webhooks page in headless Chromium', () => {
  it('adds a webhook from the form, shows its secret once, sends a test that arrives delivered, and removes it', async () => {
    const origin = new URL(t.api.url).origin;
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
    await page.goto(`${t.api.url}/ui#/webhooks`);
    await page.getByTestId('webhooks-link').filter({ hasText: 'Webhooks' }).waitFor();
    // None yet: the form is open, every event ticked.
    const form = page.getByTestId('webhook-form');
    await form.waitFor();
    await expect(page.getByTestId('webhooks-table').textContent()).resolves.toContain('No webhook is subscribed yet.');
    for (const event of ['completed', 'failed', 'cancelled', 'waiting']) await expect(page.getByTestId(`webhook-event-execution.${event}`).isChecked()).resolves.toBe(true);

    // Checked in the browser first: nothing is sent.
    const url = page.getByTestId('webhook-url');
    await url.fill('hooks.example.com/stepwise');
    await page.getByTestId('webhook-submit').click();
    await page.getByTestId('webhook-url-problems').filter({ hasText: 'Not a URL' }).waitFor();
    // The server refuses a metadata address: its 422 is shown as it came.
    await url.fill('http://169.254.169.254/latest');
    await page.getByTestId('webhook-submit').click();
    const refused = page.getByTestId('webhook-form-error');
    await refused.filter({ hasText: 'invalid_data (422)' }).waitFor();
    await expect(refused.textContent()).resolves.toContain('body/url 169.254.169.254 is a cloud metadata address');
    await expect(t.client.listWebhooks()).resolves.toEqual([]);

    await url.fill(receiver.url('/ui'));
    await page.getByTestId('webhook-event-execution.waiting').uncheck();
    await page.getByTestId('webhook-tasks').fill('ui-quick, ui-doomed');
    await page.getByTestId('webhook-submit').click();
    const notice = page.getByTestId('webhook-secret-notice');
    await notice.waitFor();
    await expect(notice.textContent()).resolves.toContain('This secret is shown only once.');
    const secret = await page.getByTestId('webhook-secret').inputValue();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    const id = (await notice.getAttribute('data-webhook-id')) as string;
    receiver.setSecret('/ui', secret);
    const [subscribed] = await t.client.listWebhooks();
    expect(subscribed).toEqual({
      webhook_id: id,
      url: receiver.url('/ui'),
      events: ['execution.completed', 'execution.failed', 'execution.cancelled'],
      tasks: ['ui-quick', 'ui-doomed'],
      created_at: expect.any(String),
    });
    await page.getByTestId('webhook-secret-copy').click();
    await page.getByTestId('webhook-secret-copied').waitFor();
    await expect(page.evaluate(() => navigator.clipboard.readText())).resolves.toBe(secret);
    await screenshot('webhooks-secret');

    // Once dismissed, the page cannot show it again: no answer holds it any more.
    await page.getByTestId('webhook-secret-dismiss').click();
    await expect(notice.count()).resolves.toBe(0);
    await page.reload();
    const row = page.locator(`tr[data-webhook-id="${id}"]`);
    await row.waitFor();
    await expect(page.content()).resolves.not.toContain(secret);
    await expect(row.textContent()).resolves.toContain('ui-quick, ui-doomed');

    // A test message, then an execution event: both arrive, signed, and show delivered.
    await row.getByTestId('webhook-test').click();
    await page.waitForURL((u) => u.hash === `#/webhooks/${id}`);
    await row.getByTestId('webhook-test-queued').waitFor();
    const deliveries = page.getByTestId('deliveries-table');
    const tested = deliveries.locator('tr[data-event="webhook.test"][data-status="delivered"]');
    await tested.waitFor({ timeout: 15_000 });
    await expect(tested.getByTestId('delivery-attempts').textContent()).resolves.toBe('1');
    await expect(tested.getByTestId('delivery-status-code').textContent()).resolves.toBe('200');
    const { execution_id: executionId } = await t.client.schedule('ui-quick');
    const completed = deliveries.locator('tr[data-event="execution.completed"][data-status="delivered"]');
    await completed.waitFor({ timeout: 15_000 });
    await expect(completed.locator('a.mono').textContent()).resolves.toBe(executionId);
    expect(receiver.verifiedAt('/ui').map((r) => r.payload?.type)).toEqual(['webhook.test', 'execution.completed']);
    await screenshot('webhooks');
    const file = path.join(SCREENSHOTS, 'webhooks.png');
    expect(statSync(file).size).toBeLessThan(200 * 1024);
    copyFileSync(file, path.join(DOCS_IMAGES, 'webhooks.png'));

    // Removing asks first; keeping it changes nothing.
    await row.getByTestId('webhook-remove').click();
    await row.getByTestId('webhook-remove-confirm').filter({ hasText: 'Remove it? Pending deliveries are dropped.' }).waitFor();
    await row.getByRole('button', { name: 'Keep it' }).click();
    await expect(row.getByTestId('webhook-remove-confirm').count()).resolves.toBe(0);
    await row.getByTestId('webhook-remove').click();
    await row.getByTestId('webhook-remove-yes').click();
    await page.waitForURL((u) => u.hash === '#/webhooks');
    await row.waitFor({ state: 'detached' });
    await expect(deliveries.count()).resolves.toBe(0);
    await expect(t.client.listWebhooks()).resolves.toEqual([]);
  });
});
