/**
 * The dashboard and the API reference in real headless Chromium (Debian's package, driven by
 * playwright-core): a real API server with auth on and a base path, a real worker, tasks defined here.
 * Screenshots go to artifacts/screenshots/.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { defineTask, NonRetryableError, Type } from '../../src/index';
import { getSpec } from '../../src/api/spec';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { registerTask } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

const CHROMIUM = process.env.STEPWISE_CHROMIUM ?? '/usr/bin/chromium';
const SCREENSHOTS = path.resolve(__dirname, '..', '..', 'artifacts', 'screenshots');
const TOKEN = 'ui-test-token-5b1f';
const BASE_PATH = '/sw';

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

let t: TestApi;
let worker: Worker;
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
  t = await startTestApi({ tokens: [TOKEN], basePath: BASE_PATH });
  worker = await startWorker(t.t, [approval, cooldown, quick, doomed, newYear, gate, parentTask] as never);
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
  await worker?.stop();
  await t?.close();
});

afterEach(() => {
  // Working offline means no request leaves the server's origin; no script error, no CSP violation.
  expect(foreignRequests).toEqual([]);
  expect(pageErrors).toEqual([]);
});

describe('dashboard in headless Chromium', () => {
  it('asks for the bearer token after a 401 and keeps it only in sessionStorage', async () => {
    await page.goto(`${t.api.url}/ui`);
    await page.getByTestId('token-dialog').waitFor();
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
      await expect(page.getByTestId('event-payload').inputValue()).resolves.toBe('{\n  "approved": false\n}');
      await expect(page.getByTestId('event-name').inputValue()).resolves.toBe('approval');
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
    await expect(card.locator('a.count.status-text-cancelled').textContent()).resolves.toBe('1');
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
    await expect(page.getByTestId('task-ui-new-year').getByTestId('task-concurrency').textContent()).resolves.toBe('At most 1 running at once, over all workers.');
    await expect(page.getByTestId('task-ui-quick').getByTestId('task-cron').count()).resolves.toBe(0);
    await expect(page.getByTestId('task-ui-quick').getByTestId('task-concurrency').count()).resolves.toBe(0);
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
    // The input takes the browser's local time; the same minute, one hour ahead, as the browser sees it.
    const [local, iso] = await page.evaluate(() => {
      const d = new Date(Date.now() + 3_600_000);
      d.setSeconds(0, 0);
      const two = (n: number) => String(n).padStart(2, '0');
      return [`${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}T${two(d.getHours())}:${two(d.getMinutes())}`, d.toISOString()];
    });
    await card.getByTestId('schedule-start-at').fill(local);
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
    await expect(row.textContent()).resolves.toContain('ui-approval, ui-cooldown, ui-doomed, ui-gate, ui-new-year, ui-parent, ui-quick');
    await expect(row.getByTestId('worker-running').textContent()).resolves.toMatch(/^\d+ \/ 8$/);
    await screenshot('workers');
    await t.client.cancel(orphanId);
    await t.client.cancel(sleepingId);
  });
});
