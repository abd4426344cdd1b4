// The bundled example tasks (what `make run` serves), driven the way the README's walk-through and the
// guides do, and the README's typed-client example (examples/client.mts), run as the README says to run
// it. The snippets the README and docs/ mark with `<!-- snippet: PATH -->` are checked against PATH.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadTasksModule } from '../../src/engine/registry';
import type { Worker } from '../../src/engine/worker';
import { EXAMPLE_TASKS_FILE } from '../../src/main';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { startWorker } from '../helpers/worker';
import { waitUntil } from '../helpers/wait-until';
import { listMarkdownFiles, listSnippets } from '../helpers/markdown';

const ROOT = path.join(__dirname, '..', '..');
const CLIENT_EXAMPLE = path.join(ROOT, 'examples', 'client.mts');

/** `npx tsx --conditions=stepwise-source examples/client.mts`, as the README runs it, against `url`. */
async function runClientExample(url: string): Promise<string> {
  const { STEPWISE_TOKEN: _token, ...env } = process.env;
  const { stdout } = await promisify(execFile)(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['--conditions=stepwise-source', 'examples/client.mts'], {
    cwd: ROOT,
    env: { ...env, STEPWISE_URL: url },
    timeout: 60000,
  });
  return stdout;
}

let api: TestApi;
let worker: Worker;
beforeAll(async () => {
  api = await startTestApi();
  worker = await startWorker(api.t, await loadTasksModule(EXAMPLE_TASKS_FILE), { pollIntervalMs: 100 });
});
afterAll(async () => {
  await worker.stop();
  await api.close();
});

describe('the example tasks', () => {
  test('are registered with their schemas, the digest with its cron schedule and concurrency limit', async () => {
    const tasks = await api.client.listTasks();
    expect(tasks.map((t) => t.name)).toEqual(['flaky-api', 'fulfil-order', 'onboarding-drip', 'order-approval', 'photo-batch', 'reindex-user', 'resize-photo', 'send-invoice', 'sync-tenant', 'weekday-digest']);
    const digest = tasks.find((t) => t.name === 'weekday-digest');
    expect(digest).toMatchObject({ cron: { pattern: '0 8 * * 1-5', timezone: 'Europe/London' }, concurrency_limit: 2 });
    // 08:00 in London is 08:00 or 07:00 UTC, on a weekday.
    const next = new Date(digest?.cron?.next_at as string);
    expect([7, 8]).toContain(next.getUTCHours());
    expect([1, 2, 3, 4, 5]).toContain(next.getUTCDay());
  });

  test('order approval: waits for the approval event, refuses a bad payload, then completes', async () => {
    const { execution_id: id } = await api.client.schedule('order-approval', { orderId: 'A-1001', amountCents: 4999 }, { idempotencyKey: 'order-A-1001' });
    await waitUntil(async () => (await api.client.get(id)).status === 'waiting', 'the approval wait');
    const bad = await api.call('POST', `/api/v1/events/${id}/approval`, { headers: { 'Content-Type': 'application/json' }, body: '{"approved":"yes"}' });
    expect(bad.status).toBe(422);
    await api.client.sendEvent(id, 'approval', { approved: true, approver: 'dana' });
    expect(await api.client.wait(id, { deadlineMs: 15_000 })).toMatchObject({
      status: 'completed',
      output: { orderId: 'A-1001', approved: true, approver: 'dana', chargeId: 'ch-A-1001' },
    });
  });

  test('flaky API: the step alone is retried through its simulated 503s, and a declined card fails at once', async () => {
    const ok = await api.client.schedule('flaky-api', { paymentId: 'p-1', failFirst: 2 });
    expect(await api.client.wait(ok.execution_id, { deadlineMs: 15_000 })).toMatchObject({ status: 'completed', attempt: 1, output: { attempts: 3 } });
    const [call] = await api.client.listSteps(ok.execution_id);
    expect(call).toMatchObject({ name: 'call-payment-api', status: 'completed', error: null });
    expect(call.failed_attempts.map((f) => [f.attempt, f.error.message])).toEqual([
      [1, 'payment API unavailable (HTTP 503) on attempt 1'],
      [2, 'payment API unavailable (HTTP 503) on attempt 2'],
    ]);
    const declined = await api.client.schedule('flaky-api', { paymentId: 'p-2', declined: true });
    expect(await api.client.wait(declined.execution_id, { deadlineMs: 15_000 })).toMatchObject({
      status: 'failed',
      error: { type: 'StepFailedError', message: 'step "call-payment-api" failed: payment p-2 was declined (HTTP 402)', retryable: false },
    });
    expect((await api.client.listSteps(declined.execution_id))[0]).toMatchObject({ status: 'failed', error: { type: 'NonRetryableError', message: 'payment p-2 was declined (HTTP 402)' } });
  });

  test('onboarding drip: three emails with durable sleeps between them', async () => {
    const { execution_id: id } = await api.client.schedule('onboarding-drip', { email: 'ada@example.com', name: 'Ada', gap: '200ms' });
    expect(await api.client.wait(id, { deadlineMs: 15_000 })).toMatchObject({
      status: 'completed',
      steps_completed: 5,
      output: { email: 'ada@example.com', sent: ['welcome', 'tips', 'check-in'] },
    });
  });

  test('photo batch: one child per photo, run at once, and the parent resumes with their outputs', async () => {
    const { execution_id: id } = await api.client.schedule('photo-batch', { urls: ['/a.jpg', '/b.jpg', '/c.jpg'], width: 320 });
    expect(await api.client.wait(id, { deadlineMs: 15_000 })).toMatchObject({ status: 'completed', output: { photos: 3, bytes: 3180 }, steps_completed: 3 });
    const children = await api.client.list({ parent_execution_id: id, order: 'asc' });
    expect(children.total).toBe(3);
    expect(children.executions.map((c) => [c.task, c.status])).toEqual(Array(3).fill(['resize-photo', 'completed']));
  });

  test('weekday digest: clients schedule it like any task, at once or with start_at', async () => {
    const now = await api.client.schedule('weekday-digest', { audience: 'staff' });
    expect(await api.client.wait(now.execution_id, { deadlineMs: 15_000 })).toMatchObject({ status: 'completed', output: { to: 'staff', lines: 2 } });
    const later = await api.client.schedule('weekday-digest', { audience: 'staff' }, { startAt: new Date(Date.now() + 500) });
    expect(await api.client.wait(later.execution_id, { deadlineMs: 15_000 })).toMatchObject({ status: 'completed' });
  });

  test('the typed-client example runs as the README shows it: it sends the approval only once the execution waits for it', async () => {
    const first = await runClientExample(api.api.url);
    expect(first).toMatch(
      new RegExp(
        [
          '^scheduled (\\S+)',
          'completed \\{"orderId":"A-1002","approved":true,"approver":"dana","chargeId":"ch-A-1002"\\}',
          'cancelled',
          'already finished: .+',
          '\\d+ completed order approvals\\n$',
        ].join('\\n'),
      ),
    );
    const id = /^scheduled (\S+)/.exec(first)?.[1] as string;
    expect(await api.client.get(id)).toMatchObject({ status: 'completed', output: { approver: 'dana' } });
    // Again: the idempotency key gives back the finished execution, and the example still runs through.
    const again = await runClientExample(api.api.url);
    expect(again.split('\n').slice(0, 2)).toEqual([`already scheduled ${id}`, 'completed {"orderId":"A-1002","approved":true,"approver":"dana","chargeId":"ch-A-1002"}']);
  });

  test('flow control as docs/flow-control.md shows it: a second schedule within the period is debounced into the first', async () => {
    const schedule = (body: object) => api.call('POST', '/api/v1/executions', { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const first = await schedule({ task: 'reindex-user', data: { userId: 'u-7' } });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ task: 'reindex-user', status: 'pending', debounced: false });
    const second = await schedule({ task: 'reindex-user', data: { userId: 'u-7' }, priority: 5 });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ execution_id: (first.body as { execution_id: string }).execution_id, debounced: true });
    const tasks = await api.client.listTasks();
    expect(tasks.find((t) => t.name === 'sync-tenant')).toMatchObject({
      concurrency: { limit: 2, key: '/tenantId' },
      rate_limit: { limit: 100, period_ms: 60_000, key: '/tenantId' },
    });
    expect(tasks.find((t) => t.name === 'reindex-user')).toMatchObject({ debounce: { period_ms: 5000, key: '/userId' } });
    const synced = await api.client.schedule('sync-tenant', { tenantId: 't-1', since: '2026-11-01' });
    expect(await api.client.wait(synced.execution_id, { deadlineMs: 15_000 })).toMatchObject({ status: 'completed', output: { tenant: 't-1', since: '2026-11-01' } });
  });

  test('deploying new code as docs/deploying-new-code.md shows it: the versioned task pins, upgrades answer, the patch is recorded', async () => {
    const order = await api.client.schedule('fulfil-order', { orderId: 'A-7' });
    await waitUntil(async () => (await api.client.get(order.execution_id)).status === 'waiting', 'fulfil-order to wait for its approval');
    expect((await api.client.get(order.execution_id)).task_version).toBe('2');
    const post = (url: string, body: object) => api.call('POST', url, { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    expect((await post(`/api/v1/executions/${order.execution_id}/upgrade`, { version: '2' })).body).toEqual({
      execution_id: order.execution_id,
      status: 'waiting',
      task_version: '2',
      previous_task_version: '2',
    });
    expect((await post('/api/v1/executions/bulk-upgrade', { task: 'fulfil-order', task_version: '1', version: '2' })).body).toEqual({ matched: 0, changed: 0, next_cursor: null });
    await api.client.sendEvent(order.execution_id, 'approval', { approved: true });
    expect(await api.client.wait(order.execution_id, { deadlineMs: 15_000 })).toMatchObject({ status: 'completed', output: { shipped: 'A-7', approved: true } });
    expect((await api.client.listTasks()).find((t) => t.name === 'fulfil-order')?.versions).toEqual([
      { version: '2', current: true, workers: 1, pending: 0, running: 0, waiting: 0 },
    ]);

    const invoice = await api.client.schedule('send-invoice', { orderId: 'A-7' });
    await waitUntil(async () => (await api.client.get(invoice.execution_id)).status === 'waiting', 'send-invoice to sleep');
    expect((await api.client.listSteps(invoice.execution_id)).map((s) => `${s.kind} ${s.name}`)).toEqual(['step render', 'patch check-vat-id', 'step check-vat-id', 'sleep grace-period']);
    await api.client.cancel(invoice.execution_id);
  });

  test('every snippet the README and the guides mark is its example file, verbatim', () => {
    const snippets = listMarkdownFiles().flatMap(listSnippets);
    for (const { file, source, block } of snippets) expect([file, source, block]).toEqual([file, source, readFileSync(path.join(ROOT, source), 'utf8')]);
    // The examples the tests above run are the ones readers see, each where a reader looks for it.
    expect(snippets.map((s) => `${s.file} ${s.source}`)).toEqual(
      expect.arrayContaining([
        'README.md examples/client.mts',
        'docs/flow-control.md examples/flow-control.ts',
        'docs/deploying-new-code.md examples/fulfil-order.ts',
        'docs/deploying-new-code.md examples/send-invoice.ts',
      ]),
    );
  });
});
