/**
 * Task versions in the dashboard (PRODUCT.md §9), in headless Chromium against a real API server and
 * worker: an execution's version, a replay that diverged, a patch marker, and executions pinned to a
 * version no worker serves, upgraded from the execution's page and from the tasks page.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { defineTask } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

const CHROMIUM = process.env.STEPWISE_CHROMIUM ?? '/usr/bin/chromium';
const SCREENSHOTS = path.resolve(__dirname, '..', '..', 'artifacts', 'screenshots');

jest.setTimeout(120_000);

/** Version 2, with a change guarded by ctx.patched: every execution started here records the marker. */
const checkout = defineTask({
  name: 'uv-checkout',
  version: '2',
  async run(ctx) {
    await ctx.step('reserve', () => 1);
    if (ctx.patched('tax-rule')) await ctx.step('tax', () => 0.2);
    await ctx.sleep('settle', '1h');
    return 'done';
  },
});

/** Its code "changes" under it: the replay after the sleep calls a sleep where the first run recorded a step. */
const runs = new Map<string, number>();
const drift = defineTask({
  name: 'uv-drift',
  async run(ctx) {
    const run = (runs.get(ctx.executionId) ?? 0) + 1;
    runs.set(ctx.executionId, run);
    if (run === 1) await ctx.step('charge', () => 1);
    else await ctx.sleep('charge', '1ms');
    await ctx.sleep('pause', '50ms');
    return 'charged';
  },
});

let t: TestApi;
let worker: Worker;
let context: BrowserContext;
let page: Page;
let profileDir: string;
const pageErrors: string[] = [];

async function statusOf(id: string, status: string): Promise<void> {
  await waitUntil(async () => (await t.client.get(id)).status === status, `${id} to be ${status}`);
}

/** Pins executions to a version no worker serves, as a deploy that stopped its last worker leaves them. */
async function pinTo(version: string, ids: readonly string[]): Promise<void> {
  for (const id of ids) await t.db.raw('UPDATE stepwise.executions SET task_version = ? WHERE id = ?', [version, id]);
}

async function openExecution(id: string): Promise<void> {
  await page.goto(`${t.api.url}/ui#/executions/${id}`);
  await page.locator('h1', { hasText: id }).waitFor();
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium is not installed at ${CHROMIUM}: run scripts/install-chromium.sh, or set STEPWISE_CHROMIUM.`);
  mkdirSync(SCREENSHOTS, { recursive: true });
  t = await startTestApi();
  // keepSuspended 0: a woken execution replays its handler, as on another worker, rather than resuming in memory.
  worker = await startWorker(t.t, [checkout, drift] as never, { keepSuspended: 0 });
  profileDir = mkdtempSync(path.join(tmpdir(), 'stepwise-chromium-'));
  context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1360, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (err) => pageErrors.push(err.message));
});

afterAll(async () => {
  await context?.close();
  if (profileDir) rmSync(profileDir, { recursive: true, force: true });
  await worker?.stop();
  await t?.close();
});

afterEach(() => expect(pageErrors).toEqual([]));

describe('task versions in the dashboard', () => {
  it('an execution a NonDeterminismError failed shows the operation its history has and the one the new code called', async () => {
    const { execution_id: id } = await t.client.schedule('uv-drift');
    await statusOf(id, 'failed');
    await openExecution(id);
    const box = page.getByTestId('divergence');
    await box.waitFor();
    await expect(box.getAttribute('data-operation')).resolves.toBe('1');
    await expect(box.getByTestId('divergence-recorded').textContent()).resolves.toBe('step “charge”');
    await expect(box.getByTestId('divergence-called').textContent()).resolves.toBe('sleep “charge”');
    await expect(box.textContent()).resolves.toContain('Replay diverged at operation #1: the history has step “charge”, the new code called sleep “charge”.');
    await expect(page.getByTestId('execution-error').locator('strong').first().textContent()).resolves.toBe('NonDeterminismError');
    await expect(page.getByTestId('task-version').textContent()).resolves.toBe('unversioned');
    // The timeline marks the recorded operation the replay met.
    const marked = page.locator('[data-testid="timeline-entry"][data-diverged="true"]');
    await expect(marked.locator('.tl-name').textContent()).resolves.toBe('charge');
    await expect(marked.locator('.tl-note').textContent()).resolves.toBe('diverged: the new code called sleep “charge”');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'versions-divergence.png'), fullPage: true });
  });

  it("an execution's page shows its version, and a patch marker as a patch that took the new path", async () => {
    const { execution_id: id } = await t.client.schedule('uv-checkout');
    await statusOf(id, 'waiting');
    await openExecution(id);
    await expect(page.getByTestId('task-version').textContent()).resolves.toBe('2');
    const patch = page.locator('[data-testid="timeline-entry"][data-kind="patch"]');
    await patch.waitFor();
    await expect(patch.locator('.tl-kind').textContent()).resolves.toBe('patch');
    await expect(patch.locator('.tl-name').textContent()).resolves.toBe('tax-rule');
    await expect(patch.locator('.tl-note').textContent()).resolves.toBe('took the new path');
    await expect(page.getByTestId('unserved-version-warning').count()).resolves.toBe(0);
  });

  it('an execution pinned to a version no worker serves says so, and upgrades to a served version from its page', async () => {
    const { execution_id: id } = await t.client.schedule('uv-checkout');
    await statusOf(id, 'waiting');
    await pinTo('1', [id]);
    await openExecution(id);
    const warning = page.getByTestId('unserved-version-warning');
    await warning.waitFor();
    await expect(warning.getAttribute('data-version')).resolves.toBe('1');
    await expect(warning.textContent()).resolves.toContain('No worker serves version 1 of task “uv-checkout”, which this execution is pinned to: it will not resume');
    const action = warning.locator('[data-testid="upgrade-action"][data-version="2"]');
    await expect(action.getByTestId('upgrade').textContent()).resolves.toBe('Upgrade to version 2');
    await action.getByTestId('upgrade').click();
    await page.screenshot({ path: path.join(SCREENSHOTS, 'versions-upgrade.png'), fullPage: true });
    await action.getByTestId('confirm-upgrade').click();
    await page.getByTestId('task-version').filter({ hasText: /^2$/ }).waitFor();
    await waitUntil(async () => (await warning.count()) === 0, 'the warning to go');
    await expect(t.client.get(id)).resolves.toMatchObject({ status: 'waiting', task_version: '2' });
  });

  it("the tasks page lists a task's versions, warns of one nobody serves, and upgrades all its executions to a served one", async () => {
    const scheduled = await Promise.all([t.client.schedule('uv-checkout'), t.client.schedule('uv-checkout')]);
    const ids = scheduled.map((s) => s.execution_id);
    for (const id of ids) await statusOf(id, 'waiting');
    await pinTo('1', ids);
    await page.goto(`${t.api.url}/ui#/tasks`);
    const card = page.getByTestId('task-uv-checkout');
    const old = card.locator('[data-testid="task-version"][data-version="1"]');
    await old.waitFor();
    await expect(old.getAttribute('data-unserved')).resolves.toBe('true');
    await expect(old.locator('td').allTextContents()).resolves.toEqual(['1', '0', '0', '0', '2']);
    const current = card.locator('[data-testid="task-version"][data-version="2"]');
    await expect(current.getByTestId('version-workers').textContent()).resolves.toBe('1');
    await expect(current.getByTestId('current-version').count()).resolves.toBe(1);
    await expect(old.getByTestId('current-version').count()).resolves.toBe(0);
    // A task only ever defined without a version has no table.
    await expect(page.getByTestId('task-uv-drift').getByTestId('task-versions').count()).resolves.toBe(0);
    const warning = card.locator('[data-testid="unserved-version"][data-version="1"]');
    await expect(warning.textContent()).resolves.toContain('No worker serves version 1: 2 executions wait for one.');
    await warning.getByTestId('upgrade-all-button').click();
    await expect(warning.getByTestId('confirm-upgrade-all').textContent()).resolves.toBe('Yes, upgrade 2');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'versions-tasks.png'), fullPage: true });
    await warning.getByTestId('confirm-upgrade-all').click();
    const result = card.getByTestId('upgrade-all-result');
    await result.waitFor();
    await expect(result.textContent()).resolves.toBe('Upgraded 2 of 2 matching executions from version 1 to version 2.');
    // Drained: the version is gone from the task's versions, and so is its warning.
    await waitUntil(async () => (await old.count()) === 0, 'version 1 to go from the table');
    await expect(card.getByTestId('unserved-version').count()).resolves.toBe(0);
    for (const id of ids) await expect(t.client.get(id)).resolves.toMatchObject({ status: 'waiting', task_version: '2' });
  });
});
