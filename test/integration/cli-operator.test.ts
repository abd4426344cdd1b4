// The operator commands (executions, events, tasks, workers) as a real process against a real API
// server and worker: human output, --json against the API's own answers, errors and exit codes.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { defineTask, NonRetryableError, Type } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { canRunOnTty, closedPort, runStepwise, type CliRunOptions } from '../helpers/stepwise-cli';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

const VERSION = (require('../../package.json') as { version: string }).version;

// Every command is a new Node process that loads the CLI (server code included) from TypeScript:
// about 1.5 s of CPU each, and several tests run a handful of them at once.
jest.setTimeout(120_000);

const quick = defineTask({
  name: 'op-quick',
  data: Type.Object({ n: Type.Integer() }),
  async run(ctx, data) {
    return { doubled: await ctx.step('double', () => data.n * 2) };
  },
});

const flaky = defineTask({
  name: 'op-flaky',
  async run(ctx) {
    return ctx.step(
      'call-api',
      ({ attempt }) => {
        if (attempt < 3) throw new Error(`api unavailable on attempt ${attempt}`);
        return { attempt };
      },
      { retry: { maxAttempts: 5, initialDelay: '10ms', maxDelay: '20ms' } },
    );
  },
});

const approval = defineTask({
  name: 'op-approval',
  events: { decision: Type.Object({ approved: Type.Boolean() }, { additionalProperties: false }) },
  async run(ctx) {
    const decision = await ctx.waitForEvent('decision', { timeout: '1h' });
    return { approved: decision.approved };
  },
});

const doomed = defineTask({
  name: 'op-doomed',
  async run() {
    throw new NonRetryableError('the order was declined');
  },
});

const sleepy = defineTask({
  name: 'op-sleepy',
  async run(ctx) {
    await ctx.sleep('nap', '1h');
    return 'rested';
  },
});

let api: TestApi;
let worker: Worker;

beforeAll(async () => {
  // debug: the access log shows when the CLI's requests arrive, which one test waits on.
  api = await startTestApi({ logLevel: 'debug' });
  worker = await startWorker(api.t, [quick, flaky, approval, doomed, sleepy] as never);
});
afterAll(async () => {
  await worker.stop();
  await api.close();
});

/** `stepwise ARGS --url <the test server>`. */
function stepwise(args: string[], options?: CliRunOptions) {
  return runStepwise([...args, '--url', api.api.url], options);
}

async function statusOf(id: string, status: string): Promise<void> {
  await waitUntil(async () => (await api.client.get(id)).status === status, `${id} to be ${status}`);
}

/** A tag of this test's own, so that a filter finds only the executions the test scheduled. */
function freshTag(name: string): string {
  return `${name}-${Math.random().toString(36).slice(2, 10)}`;
}

/** The same instant written with a +01:00 offset, as an operator in Paris might type it. */
function inParis(iso: string): string {
  return new Date(Date.parse(iso) + 3600_000).toISOString().replace('Z', '+01:00');
}

/** Schedules `count` op-sleepy executions with `tags` and waits until each sleeps. */
async function sleepers(count: number, tags: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) ids.push((await api.client.schedule('op-sleepy', {}, { tags })).execution_id);
  for (const id of ids) await statusOf(id, 'waiting');
  return ids;
}

async function statusesOf(ids: readonly string[]): Promise<string[]> {
  return Promise.all(ids.map(async (id) => (await api.client.get(id)).status));
}

/** A table's cells: the header line and the rows, split on the two-space column gaps. */
function tableOf(stdout: string): { header: string[]; rows: string[][]; lines: string[] } {
  const lines = stdout.trimEnd().split('\n');
  const cells = (line: string) => line.trim().split(/\s{2,}/);
  return { header: cells(lines[0]), rows: lines.slice(1).map(cells), lines };
}

describe('stepwise executions', () => {
  test('schedule prints the new execution, -q only its id, --json the API answer; a repeated --key finds the same one', async () => {
    const created = await stepwise(['executions', 'schedule', 'op-quick', '{"n":1}', '--key', 'op-key-1']);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const [, id] = /^scheduled execution ([0-9a-f-]{36}) of op-quick \(pending\)\n$/.exec(created.stdout) ?? [];
    expect(id).toBeDefined();

    const [quiet, json] = await Promise.all([
      stepwise(['executions', 'schedule', 'op-quick', '{"n":1}', '--key', 'op-key-1', '-q']),
      stepwise(['executions', 'schedule', 'op-quick', '{"n":1}', '--key', 'op-key-1', '--json']),
    ]);
    expect(quiet).toMatchObject({ code: 0, stdout: `${id}\n`, stderr: '' });
    const document = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(Object.keys(document).sort()).toEqual(['created_at', 'execution_id', 'status', 'task']);
    expect(document).toMatchObject({ execution_id: id, task: 'op-quick' });

    const again = await stepwise(['executions', 'schedule', 'op-quick', '{"n":1}', '--key', 'op-key-1']);
    expect(again.stdout).toMatch(new RegExp(`^execution ${id} of op-quick already exists for that key \\(\\w+\\); nothing new was scheduled\\n$`));
  });

  test('schedule takes its data from --data-file or stdin, {} by default, and --start-at keeps it pending', async () => {
    const file = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'stepwise-cli-')), 'data.json');
    await fs.writeFile(file, '{"n":20}');
    const later = new Date(Date.now() + 3600_000).toISOString();
    const [fromFile, fromStdin, empty, delayed] = await Promise.all([
      stepwise(['executions', 'schedule', 'op-quick', '--data-file', file, '-q']),
      stepwise(['executions', 'schedule', 'op-quick', '-', '-q'], { stdin: '{"n":30}' }),
      stepwise(['executions', 'schedule', 'op-sleepy', '-q']),
      stepwise(['executions', 'schedule', 'op-quick', '{"n":40}', '--start-at', later, '-q']),
    ]);
    for (const r of [fromFile, fromStdin, empty, delayed]) expect(r).toMatchObject({ code: 0, stderr: '' });
    expect((await api.client.wait(fromFile.stdout.trim(), { deadlineMs: 10000 })).output).toEqual({ doubled: 40 });
    expect((await api.client.wait(fromStdin.stdout.trim(), { deadlineMs: 10000 })).output).toEqual({ doubled: 60 });
    expect((await api.client.get(empty.stdout.trim())).data).toEqual({});
    expect(await api.client.get(delayed.stdout.trim())).toMatchObject({ status: 'pending', start_at: later });
    await api.client.cancel(delayed.stdout.trim());
  });

  test('schedule --priority sets the priority, which get prints; a bad one is a usage error', async () => {
    const later = new Date(Date.now() + 3600_000).toISOString();
    const scheduled = await stepwise(['executions', 'schedule', 'op-quick', '{"n":50}', '--start-at', later, '--priority', '-7', '-q']);
    expect(scheduled).toMatchObject({ code: 0, stderr: '' });
    const id = scheduled.stdout.trim();
    expect(await api.client.get(id)).toMatchObject({ priority: -7 });
    expect((await stepwise(['executions', 'get', id])).stdout).toMatch(/^priority +-7$/m);
    await api.client.cancel(id);
    const bad = await stepwise(['executions', 'schedule', 'op-quick', '--priority', '1.5']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('must be an integer from -1000000 to 1000000');
  });

  test('list prints aligned ID, TASK, STATUS, CREATED, DURATION, TAGS columns and filters by --status and --task', async () => {
    const { execution_id: done } = await api.client.schedule('op-quick', { n: 5 });
    const { execution_id: asleep } = await api.client.schedule('op-sleepy');
    await statusOf(done, 'completed');
    await statusOf(asleep, 'waiting');

    const r = await stepwise(['executions', 'list', '--task', 'op-quick', '--status', 'completed']);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const { header, rows, lines } = tableOf(r.stdout);
    expect(header).toEqual(['ID', 'TASK', 'STATUS', 'CREATED (UTC)', 'DURATION', 'TAGS']);
    const row = rows.find((cells) => cells[0] === done);
    expect(row?.slice(1, 3)).toEqual(['op-quick', 'completed']);
    expect(row?.[3]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
    expect(row?.[4]).toMatch(/^\d+ ms$|^\d+\.\d s$/);
    const doneLine = lines.find((l) => l.startsWith(done)) as string;
    expect(doneLine.indexOf('op-quick')).toBe(lines[0].indexOf('TASK'));
    expect(doneLine.indexOf('completed')).toBe(lines[0].indexOf('STATUS'));
    expect(rows.every((cells) => cells.length < 3 || (cells[1] === 'op-quick' && cells[2] === 'completed'))).toBe(true);
    const total = (await api.client.list({ task: 'op-quick', status: 'completed' })).total;
    expect(lines.at(-1)).toBe(`1-${total} of ${total} execution${total === 1 ? '' : 's'}`);

    const waiting = await stepwise(['executions', 'list', '--status', 'waiting']);
    expect(tableOf(waiting.stdout).rows.find((cells) => cells[0] === asleep)?.slice(1, 3)).toEqual(['op-sleepy', 'waiting']);
  });

  test('list pages with --limit, --offset and --order, and --json is the API page as-is', async () => {
    for (let i = 0; i < 3; i += 1) await api.client.schedule('op-quick', { n: 100 + i });
    await waitUntil(async () => (await api.client.list({ task: 'op-quick', status: 'pending' })).total === 0, 'op-quick executions to finish');
    const filter = { task: 'op-quick', limit: 2, offset: 1, order: 'asc' } as const;
    const [json, text] = await Promise.all([
      stepwise(['executions', 'list', '--task', 'op-quick', '--limit', '2', '--offset', '1', '--order', 'asc', '--json']),
      stepwise(['executions', 'list', '--task', 'op-quick', '--limit', '2', '--offset', '1', '--order', 'asc']),
    ]);
    const page = await api.client.list(filter);
    expect(JSON.parse(json.stdout)).toEqual(page);
    expect(tableOf(text.stdout).rows.slice(0, 2).map((cells) => cells[0])).toEqual(page.executions.map((e) => e.execution_id));
    expect(text.stdout).toContain(`2-3 of ${page.total} executions (next page: --offset 3)`);
  });

  test('get prints the execution field by field; --json equals GET /executions/{id}', async () => {
    const { execution_id: id } = await api.client.schedule('op-quick', { n: 21 });
    await api.client.wait(id, { deadlineMs: 10000 });
    const [text, json] = await Promise.all([stepwise(['executions', 'get', id]), stepwise(['executions', 'get', id, '--json'])]);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    expect(text.stdout).toMatch(new RegExp(`^execution +${id}$`, 'm'));
    expect(text.stdout).toMatch(/^task +op-quick$/m);
    expect(text.stdout).toMatch(/^status +completed$/m);
    expect(text.stdout).toMatch(/^steps +1 completed$/m);
    // Under half a second old reads "now": a CLI that starts fast may get there that soon.
    expect(text.stdout).toMatch(/^created +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \((now|.+ ago)\)$/m);
    expect(text.stdout).toMatch(/^data +\{"n":21\}$/m);
    expect(text.stdout).toMatch(/^output +\{"doubled":42\}$/m);
    expect(text.stdout).toMatch(/^error +–$/m);
    expect(JSON.parse(json.stdout)).toEqual(await api.client.get(id));
  });

  test('steps shows each step with its kind, status and failed attempts; --json equals GET /executions/{id}/steps', async () => {
    const { execution_id: id } = await api.client.schedule('op-flaky');
    await api.client.wait(id, { deadlineMs: 10000 });
    const [text, json] = await Promise.all([stepwise(['executions', 'steps', id]), stepwise(['executions', 'steps', id, '--json'])]);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    const [history, failures] = text.stdout.split('\nFailed attempts\n');
    const steps = tableOf(history);
    expect(steps.header).toEqual(['SEQ', 'NAME', 'KIND', 'STATUS', 'STARTED (UTC)', 'DURATION', 'FAILED ATTEMPTS', 'NOTE']);
    expect(steps.rows).toHaveLength(1);
    expect(steps.rows[0].slice(0, 4)).toEqual(['0', 'call-api', 'step', 'completed']);
    expect(steps.rows[0][6]).toBe('2');
    expect(steps.rows[0][7]).toBe('result {"attempt":3}');
    const attempts = tableOf(failures);
    expect(attempts.header).toEqual(['SEQ', 'STEP', 'ATTEMPT', 'STARTED (UTC)', 'DURATION', 'ERROR']);
    expect(attempts.rows.map((cells) => [cells[1], cells[2], cells[5]])).toEqual([
      ['call-api', '1', 'Error: api unavailable on attempt 1'],
      ['call-api', '2', 'Error: api unavailable on attempt 2'],
    ]);
    expect(JSON.parse(json.stdout)).toEqual({ items: await api.client.listSteps(id) });
  });

  test('wait exits 0 and prints the execution once it completes, though it was still running when the wait began', async () => {
    const { execution_id: id } = await api.client.schedule('op-approval');
    await statusOf(id, 'waiting');
    // The command reads the execution once, then long-polls: deliver the event once that read is done.
    const reads = () => api.logs.lines.filter((l) => l.includes('"method":"GET"') && /"route":"[^"]*\/executions\/:id"/.test(l)).length;
    const before = reads();
    const waiting = stepwise(['executions', 'wait', id, '--timeout', '20']);
    await waitUntil(() => reads() > before, 'the command to read the execution', 20000);
    await api.client.sendEvent(id, 'decision', { approved: true });
    const r = await waiting;
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(/^status +completed$/m);
    expect(r.stdout).toMatch(/^output +\{"approved":true\}$/m);
  });

  test('wait exits 4 when the execution failed, 5 when it was cancelled, 6 at --timeout, and says which', async () => {
    const { execution_id: failed } = await api.client.schedule('op-doomed');
    const { execution_id: cancelled } = await api.client.schedule('op-sleepy');
    const { execution_id: asleep } = await api.client.schedule('op-sleepy');
    await statusOf(failed, 'failed');
    await statusOf(asleep, 'waiting');
    await api.client.cancel(cancelled);
    const [f, c, t, tj] = await Promise.all([
      stepwise(['executions', 'wait', failed]),
      stepwise(['executions', 'wait', cancelled]),
      stepwise(['executions', 'wait', asleep, '--timeout', '1']),
      stepwise(['executions', 'wait', asleep, '--timeout', '0', '--json']),
    ]);
    expect(f.code).toBe(4);
    expect(f.stderr).toBe(`stepwise: execution ${failed} failed: NonRetryableError: the order was declined\n`);
    expect(f.stdout).toMatch(/^status +failed$/m);
    expect(c.code).toBe(5);
    expect(c.stderr).toBe(`stepwise: execution ${cancelled} was cancelled\n`);
    expect(t.code).toBe(6);
    expect(t.stderr).toBe(`stepwise: execution ${asleep} is still waiting after 1 s (--timeout)\n`);
    expect(t.stdout).toBe('');
    expect(tj.code).toBe(6);
    expect(JSON.parse(tj.stdout)).toMatchObject({ execution_id: asleep, status: 'waiting' });
  });

  test('watch prints one line per change until the execution completes, and exits 0', async () => {
    const { execution_id: id } = await api.client.schedule('op-approval');
    await statusOf(id, 'waiting');
    const streams = async () => Number(/^stepwise_http_streams_open\{stream="execution"\} (\d+)/m.exec((await api.call('GET', '/metrics')).text)?.[1] ?? 0);
    const watching = stepwise(['executions', 'watch', id]);
    await waitUntil(async () => (await streams()) === 1, 'the command to open its stream', 20000);
    await api.client.sendEvent(id, 'decision', { approved: true });
    const r = await watching;
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC {2}waiting {4}0 steps completed {2}waiting for event "decision" \(times out .* UTC\)$/);
    expect(lines[lines.length - 1]).toMatch(/ UTC {2}completed {2}1 step completed {2}output \{"approved":true\}$/);
    expect(lines.length).toBeGreaterThanOrEqual(2);
  });

  test('watch exits 4 when the execution failed and 5 when it was cancelled; --json prints one document per line', async () => {
    const { execution_id: failed } = await api.client.schedule('op-doomed');
    const { execution_id: cancelled } = await api.client.schedule('op-sleepy');
    await statusOf(failed, 'failed');
    await api.client.cancel(cancelled);
    const [f, c, fj] = await Promise.all([
      stepwise(['executions', 'watch', failed]),
      stepwise(['executions', 'watch', cancelled]),
      stepwise(['executions', 'watch', failed, '--json']),
    ]);
    expect(f.code).toBe(4);
    expect(f.stderr).toBe(`stepwise: execution ${failed} failed: NonRetryableError: the order was declined\n`);
    expect(f.stdout).toMatch(/ UTC {2}failed {5}0 steps completed {2}NonRetryableError: the order was declined\n$/);
    expect(c.code).toBe(5);
    expect(c.stderr).toBe(`stepwise: execution ${cancelled} was cancelled\n`);
    expect(fj.code).toBe(4);
    const docs = fj.stdout.trimEnd().split('\n').map((line) => JSON.parse(line));
    expect(docs).toEqual([await api.client.get(failed)]);
    const missing = await stepwise(['executions', 'watch', '0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^stepwise: 404 execution_not_found: /);
  });

  test('cancel cancels a waiting execution; cancelling a completed one is one 409 line and exit 1', async () => {
    const { execution_id: asleep } = await api.client.schedule('op-sleepy');
    await statusOf(asleep, 'waiting');
    const r = await stepwise(['executions', 'cancel', asleep]);
    expect(r).toMatchObject({ code: 0, stdout: `cancelled execution ${asleep}\n`, stderr: '' });
    expect((await api.client.get(asleep)).status).toBe('cancelled');
    const again = await stepwise(['executions', 'cancel', asleep, '--json']);
    expect(JSON.parse(again.stdout)).toEqual({ execution_id: asleep, status: 'cancelled' });

    const { execution_id: done } = await api.client.schedule('op-quick', { n: 1 });
    await api.client.wait(done, { deadlineMs: 10000 });
    const refused = await stepwise(['executions', 'cancel', done]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toBe(`stepwise: 409 execution_not_cancellable: execution ${done} is completed and cannot be cancelled\n`);
  });
});

describe('stepwise executions: tags, keys and creation times', () => {
  test('schedule --tag labels an execution; list --tag, --idempotency-key, --created-after and --created-before find it', async () => {
    const tag = freshTag('op-find');
    const first = await stepwise(['executions', 'schedule', 'op-sleepy', '--tag', tag, '--tag', 'eu', '--key', `${tag}-key`, '-q']);
    expect(first).toMatchObject({ code: 0, stderr: '' });
    const a = first.stdout.trim();
    const b = (await stepwise(['executions', 'schedule', 'op-sleepy', '--tag', tag, '-q'])).stdout.trim();
    const [createdA, createdB] = await Promise.all([a, b].map(async (id) => (await api.client.get(id)).created_at));
    expect(await api.client.get(a)).toMatchObject({ tags: [tag, 'eu'], idempotency_key: `${tag}-key` });

    const ids = (r: { stdout: string }) => (JSON.parse(r.stdout) as { executions: { execution_id: string }[] }).executions.map((e) => e.execution_id);
    const [both, tagged, byKey, window, text] = await Promise.all([
      stepwise(['executions', 'list', '--tag', tag, '--tag', 'eu', '--json']),
      stepwise(['executions', 'list', '--tag', tag, '--order', 'asc', '--json']),
      stepwise(['executions', 'list', '--idempotency-key', `${tag}-key`, '--json']),
      // An offset is written back in UTC; after is inclusive and before exclusive.
      stepwise(['executions', 'list', '--tag', tag, '--created-after', inParis(createdA), '--created-before', inParis(createdB), '--json']),
      stepwise(['executions', 'list', '--tag', tag, '--tag', 'eu']),
    ]);
    expect(ids(both)).toEqual([a]);
    expect(ids(tagged)).toEqual([a, b]);
    expect(ids(byKey)).toEqual([a]);
    expect(ids(window)).toEqual(createdA < createdB ? [a] : []);
    expect(JSON.parse(both.stdout)).toEqual(await api.client.list({ tag: [tag, 'eu'] }));
    const table = tableOf(text.stdout);
    expect(table.rows[0][0]).toBe(a);
    expect(table.rows[0][table.header.indexOf('TAGS')]).toBe(`${tag},eu`);
    expect(text.stdout.trimEnd().split('\n').at(-1)).toBe('1-1 of 1 execution');
    const shown = (await stepwise(['executions', 'get', a])).stdout;
    expect(shown).toMatch(new RegExp(`^key +${tag}-key$`, 'm'));
    expect(shown).toMatch(new RegExp(`^tags +${tag}, eu$`, 'm'));
    expect((await stepwise(['executions', 'get', b])).stdout).not.toMatch(/^key /m);
    for (const id of [a, b]) await api.client.cancel(id);
  });
});

describe('stepwise executions attempts and retry', () => {
  test('retry puts a failed execution back; attempts then lists both attempts with outcome, worker and error, --stack their stacks, --json the API answer', async () => {
    const { execution_id: id } = await api.client.schedule('op-doomed');
    await statusOf(id, 'failed');
    const retried = await stepwise(['executions', 'retry', id]);
    expect(retried).toMatchObject({ code: 0, stdout: `retried execution ${id} (now pending)\n`, stderr: '' });
    await waitUntil(async () => (await api.client.get(id)).status === 'failed' && (await api.client.listAttempts(id)).length === 2, `${id} to fail again`);

    const [text, stacks, json] = await Promise.all([
      stepwise(['executions', 'attempts', id]),
      stepwise(['executions', 'attempts', id, '--stack']),
      stepwise(['executions', 'attempts', id, '--json']),
    ]);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    const { header, rows } = tableOf(text.stdout);
    expect(header).toEqual(['ATTEMPT', 'OUTCOME', 'WORKER', 'STARTED (UTC)', 'DURATION', 'ERROR']);
    expect(rows.map((cells) => [cells[0], cells[1], cells[2], cells[5]])).toEqual([
      ['1', 'failed', worker.id, 'NonRetryableError: the order was declined'],
      ['2', 'failed', worker.id, 'NonRetryableError: the order was declined'],
    ]);
    expect(rows[0][3]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
    expect(rows[0][4]).toMatch(/^\d+ ms$|^\d+\.\d s$/);

    const attempts = await api.client.listAttempts(id);
    expect(JSON.parse(json.stdout)).toEqual({ attempts });
    expect(stacks.stdout.startsWith(text.stdout)).toBe(true);
    const [, traces] = stacks.stdout.split('\nStack traces\n');
    expect(traces).toMatch(/^attempt 1 \(failed\):\n  NonRetryableError: the order was declined\n/);
    expect(traces).toContain('\nattempt 2 (failed):\n  NonRetryableError: the order was declined\n');
    expect(traces).toMatch(/^ {4,}at .*cli-operator\.test\.ts:\d+:\d+\)?$/m);
    expect(text.stdout).not.toContain('    at ');
  });

  test('attempts of a pending execution says there are none yet; retry --json prints the API answer', async () => {
    const { execution_id: later } = await api.client.schedule('op-sleepy', {}, { startAt: new Date(Date.now() + 3600_000) });
    const none = await stepwise(['executions', 'attempts', later]);
    expect(none).toMatchObject({ code: 0, stdout: 'no attempts yet (the execution has not been claimed by a worker)\n', stderr: '' });
    await api.client.cancel(later);
    const json = await stepwise(['executions', 'retry', later, '--json']);
    expect(json).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(json.stdout)).toEqual({ execution_id: later, status: 'pending' });
    await statusOf(later, 'waiting'); // a retry is due at once: it ran to its sleep
    await api.client.cancel(later);
  });

  test('retry of a completed execution is one 409 line and exit 1, like cancel; of an unknown one a 404', async () => {
    const { execution_id: done } = await api.client.schedule('op-quick', { n: 2 });
    await api.client.wait(done, { deadlineMs: 10000 });
    const [refused, missing, attemptsOfMissing] = await Promise.all([
      stepwise(['executions', 'retry', done]),
      stepwise(['executions', 'retry', 'no-such-id']),
      stepwise(['executions', 'attempts', 'no-such-id']),
    ]);
    expect(refused).toMatchObject({
      code: 1,
      stdout: '',
      stderr: `stepwise: 409 execution_not_retryable: execution ${done} is completed and cannot be retried; only a failed or cancelled one can\n`,
    });
    expect(missing).toMatchObject({ code: 1, stdout: '', stderr: 'stepwise: 404 execution_not_found: execution "no-such-id" was not found\n' });
    expect(attemptsOfMissing).toMatchObject({ code: 1, stdout: '', stderr: 'stepwise: 404 execution_not_found: execution "no-such-id" was not found\n' });
    expect((await api.client.get(done)).status).toBe('completed');
  });
});

describe('stepwise executions bulk-cancel and bulk-retry', () => {
  test('bulk-cancel --yes cancels what the filter matches and prints "matched N, changed M"; bulk-retry puts them back, --limit at a time', async () => {
    const tag = freshTag('op-bulk');
    const ids = await sleepers(3, [tag]);
    const [bystander] = await sleepers(1, []);

    const cancelled = await stepwise(['executions', 'bulk-cancel', '--tag', tag, '--task', 'op-sleepy', '--yes']);
    expect(cancelled).toMatchObject({ code: 0, stdout: 'matched 3, changed 3\n', stderr: '' });
    expect(await statusesOf(ids)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect((await api.client.get(bystander)).status).toBe('waiting');

    const firstTwo = await stepwise(['executions', 'bulk-retry', '--tag', tag, '--limit', '2', '-y']);
    expect(firstTwo).toMatchObject({ code: 0, stderr: '' });
    expect(firstTwo.stdout).toBe('matched 2, changed 2\nthe limit (2) was reached: more executions may match; run the command again for them\n');
    expect((await statusesOf(ids))[2]).toBe('cancelled'); // oldest first
    const rest = await stepwise(['executions', 'bulk-retry', '--tag', tag, '--status', 'cancelled', '--yes', '--json']);
    expect(rest).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(rest.stdout)).toEqual({ matched: 1, changed: 1, next_cursor: null });
    for (const id of ids) await statusOf(id, 'waiting');

    const nothing = await stepwise(['executions', 'bulk-retry', '--tag', tag, '--yes']);
    expect(nothing).toMatchObject({ code: 0, stdout: 'matched 0, changed 0\n', stderr: '' });
    await api.client.bulkCancel({ tag: [tag] });
    await api.client.cancel(bystander);
  });

  test('without a filter, with --all and a filter, or without --yes when stdin is no terminal, it refuses with exit 2 and changes nothing', async () => {
    const [sleeper] = await sleepers(1, []);
    const counts = async () => Promise.all((['cancelled', 'failed', 'waiting'] as const).map(async (status) => (await api.client.list({ status })).total));
    const before = await counts();
    const runs = await Promise.all([
      stepwise(['executions', 'bulk-cancel', '--yes']),
      stepwise(['executions', 'bulk-retry', '--limit', '5', '--json', '--yes']),
      stepwise(['executions', 'bulk-cancel', '--all', '--task', 'op-sleepy', '--yes']),
      stepwise(['executions', 'bulk-cancel', '--task', 'op-sleepy']),
      stepwise(['executions', 'bulk-retry', '--all']),
      stepwise(['executions', 'bulk-retry', '--status', 'completed', '--yes']),
      stepwise(['executions', 'bulk-cancel', '--tag', 'x', '--limit', '10001', '--yes']),
      stepwise(['executions', 'bulk-cancel', '--created-after', '2024-10-30T00:00', '--yes']),
    ]);
    for (const r of runs) expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(runs.map((r) => r.stderr.trim())).toEqual([
      'stepwise: bulk-cancel needs a filter (--task, --status, --tag, --created-after or --created-before), or --all to cancel every pending, running or waiting execution',
      'stepwise: bulk-retry needs a filter (--task, --status, --tag, --created-after or --created-before), or --all to retry every failed or cancelled execution',
      'stepwise: --all means no filter: give either --all or filters, not both',
      'stepwise: bulk-cancel asks before it acts, but stdin is not a terminal: add --yes to cancel without asking',
      'stepwise: bulk-retry asks before it acts, but stdin is not a terminal: add --yes to retry without asking',
      "stepwise: option '--status <status>' argument 'completed' is invalid. Allowed choices are failed, cancelled. (see 'stepwise executions bulk-retry --help')",
      "stepwise: option '--limit <n>' argument '10001' is invalid. must be an integer, from 1 to 10000 (see 'stepwise executions bulk-cancel --help')",
      "stepwise: option '--created-after <instant>' argument '2024-10-30T00:00' is invalid. must be an ISO 8601 instant with a time zone, such as 2024-10-30T00:00:00Z (see 'stepwise executions bulk-cancel --help')",
    ]);
    expect(await counts()).toEqual(before);
    expect((await api.client.get(sleeper)).status).toBe('waiting');
    await api.client.cancel(sleeper);
  });

  (canRunOnTty ? test : test.skip)('on a terminal it counts what matches and asks first: only y goes ahead', async () => {
    const tag = freshTag('op-ask');
    const ids = await sleepers(2, [tag]);
    const onTty = (args: string[], answer: string) => stepwise(args, { tty: true, stdin: answer });

    const declined = await onTty(['executions', 'bulk-cancel', '--tag', tag], 'n\n');
    expect(declined.code).toBe(1);
    expect(declined.stdout).toBe(`2 pending, running or waiting executions match (tag ${tag}). Cancel them? [y/N] stepwise: not confirmed: nothing was cancelled\n`);
    expect(await statusesOf(ids)).toEqual(['waiting', 'waiting']);

    const silent = await onTty(['executions', 'bulk-cancel', '--tag', tag, '--status', 'waiting'], '');
    expect(silent.code).toBe(1);
    expect(silent.stdout).toBe(`2 waiting executions match (tag ${tag}). Cancel them? [y/N] \nstepwise: not confirmed: nothing was cancelled\n`);

    const accepted = await onTty(['executions', 'bulk-cancel', '--tag', tag], 'yes\n');
    expect(accepted.code).toBe(0);
    expect(accepted.stdout).toBe(`2 pending, running or waiting executions match (tag ${tag}). Cancel them? [y/N] matched 2, changed 2\n`);
    expect(await statusesOf(ids)).toEqual(['cancelled', 'cancelled']);

    const everything = await onTty(['executions', 'bulk-retry', '--all', '--limit', '1'], 'N\n');
    expect(everything.code).toBe(1);
    expect(everything.stdout).toMatch(/^\d+ failed or cancelled executions match \(no filter: --all\)\. Retry the oldest 1 of them \(--limit\)\? \[y\/N\] stepwise: not confirmed: nothing was retried\n$/);
    expect(await statusesOf(ids)).toEqual(['cancelled', 'cancelled']);
  });
});

describe('stepwise tasks pause and resume', () => {
  test('pause stops claims and tasks list shows it; resume lets the pending execution run; --json prints the API answer', async () => {
    try {
      const paused = await stepwise(['tasks', 'pause', 'op-quick']);
      expect(paused).toMatchObject({ code: 0, stdout: 'task op-quick is paused: its executions are not claimed until it is resumed\n', stderr: '' });
      const { execution_id: id } = await api.client.schedule('op-quick', { n: 3 });
      const [list, json] = await Promise.all([stepwise(['tasks', 'list']), stepwise(['tasks', 'list', '--json'])]);
      expect(tableOf(list.stdout).rows.find((cells) => cells[0] === 'op-quick')?.slice(0, 2)).toEqual(['op-quick', 'yes']);
      expect(tableOf(list.stdout).rows.find((cells) => cells[0] === 'op-doomed')?.slice(0, 2)).toEqual(['op-doomed', 'no']);
      expect((JSON.parse(json.stdout) as { items: { name: string; paused: boolean }[] }).items.find((t) => t.name === 'op-quick')?.paused).toBe(true);
      expect((await api.client.get(id)).status).toBe('pending');

      const again = await stepwise(['tasks', 'pause', 'op-quick', '--json']);
      expect(JSON.parse(again.stdout)).toEqual({ name: 'op-quick', paused: true });
      const resumed = await stepwise(['tasks', 'resume', 'op-quick']);
      expect(resumed).toMatchObject({ code: 0, stdout: 'task op-quick is not paused\n', stderr: '' });
      expect((await api.client.wait(id, { deadlineMs: 10000 })).output).toEqual({ doubled: 6 });
      const json2 = await stepwise(['tasks', 'resume', 'op-quick', '--json']);
      expect(JSON.parse(json2.stdout)).toEqual({ name: 'op-quick', paused: false });
    } finally {
      await api.client.resumeTask('op-quick');
    }
  });

  test('pause or resume of a task no worker registered is one 404 line and exit 1', async () => {
    const [pause, resume] = await Promise.all([stepwise(['tasks', 'pause', 'op-nobody-serves']), stepwise(['tasks', 'resume', 'op-nobody-serves'])]);
    for (const r of [pause, resume]) {
      expect(r).toMatchObject({ code: 1, stdout: '', stderr: 'stepwise: 404 task_not_found: task "op-nobody-serves" is not registered\n' });
    }
  });
});

describe('stepwise events send', () => {
  test('delivers the payload and the execution resumes; a payload its schema refuses is one 422 line', async () => {
    const { execution_id: id } = await api.client.schedule('op-approval');
    await statusOf(id, 'waiting');
    const refused = await stepwise(['events', 'send', id, 'decision', '{"approved":"yes"}']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^stepwise: 422 invalid_data: payload does not match .* \(body\/approved: must be boolean\)\n$/);

    const sent = await stepwise(['events', 'send', id, 'decision', '{"approved":false}']);
    expect(sent).toMatchObject({ code: 0, stderr: '' });
    expect(sent.stdout).toMatch(new RegExp(`^delivered event "decision" to execution ${id} \\(now \\w+\\)\\n$`));
    expect((await api.client.wait(id, { deadlineMs: 10000 })).output).toEqual({ approved: false });
  });

  test('--json prints the API answer; the payload may come from stdin, and defaults to null', async () => {
    const { execution_id: id } = await api.client.schedule('op-approval');
    await statusOf(id, 'waiting');
    const sent = await stepwise(['events', 'send', id, 'decision', '-', '--json'], { stdin: '{"approved":true}' });
    expect(sent).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(sent.stdout)).toEqual({ status: 'delivered', execution_id: id, event_name: 'decision', execution_status: expect.any(String) });
    await api.client.wait(id, { deadlineMs: 10000 });

    // No payload is null: the task's schema refuses it, which shows that null was what was sent.
    const { execution_id: other } = await api.client.schedule('op-approval');
    await statusOf(other, 'waiting');
    const empty = await stepwise(['events', 'send', other, 'decision']);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toMatch(/^stepwise: 422 invalid_data: .*must be object/);
    await api.client.cancel(other);
  });

  test('--idempotency-key makes a retry safe: the same key again, after the execution moved on, exits 0 with the same output', async () => {
    const { execution_id: id } = await api.client.schedule('op-approval');
    await statusOf(id, 'waiting');
    const args = ['events', 'send', id, 'decision', '{"approved":true}', '--idempotency-key', `approval-${id}`];
    const first = await stepwise(args);
    expect(first).toMatchObject({ code: 0, stderr: '' });
    expect(first.stdout).toMatch(new RegExp(`^delivered event "decision" to execution ${id} \\(now \\w+\\)\\n$`));
    await statusOf(id, 'completed');

    // The answer of the first delivery, unchanged, although the execution no longer waits.
    const repeat = await stepwise(args);
    expect(repeat).toEqual(first);
    // Without the key, the same delivery is judged as usual.
    const keyless = await stepwise(args.slice(0, 5));
    expect(keyless.code).toBe(1);
    expect(keyless.stderr).toMatch(/^stepwise: 409 not_waiting_for_event: /);
    expect((await api.client.get(id)).output).toEqual({ approved: true });
  });
});

describe('stepwise tasks list and workers', () => {
  test('tasks list shows every task with its live workers and counts by status; --json equals GET /tasks', async () => {
    await waitUntil(async () => {
      const active = await Promise.all(['pending', 'running'].map((status) => api.client.list({ status: status as 'pending' })));
      return active.every((page) => page.total === 0);
    }, 'no execution to be pending or running');
    const [text, json] = await Promise.all([stepwise(['tasks', 'list']), stepwise(['tasks', 'list', '--json'])]);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    const { header, rows } = tableOf(text.stdout);
    expect(header).toEqual(['NAME', 'PAUSED', 'WORKERS', 'PENDING', 'RUNNING', 'WAITING', 'COMPLETED', 'FAILED', 'CANCELLED', 'LIMITS', 'VERSIONS', 'CRON']);
    const tasks = await api.client.listTasks();
    expect(rows.map((cells) => cells[0])).toEqual(tasks.map((t) => t.name));
    const doomedTask = tasks.find((t) => t.name === 'op-doomed');
    expect(rows.find((cells) => cells[0] === 'op-doomed')).toEqual(['op-doomed', 'no', '1', '0', '0', '0', '0', String(doomedTask?.counts.failed), '0', '–', '–', '–']);
    expect(JSON.parse(json.stdout)).toEqual({ items: tasks });
  });

  test('workers lists the running worker with its tasks and slots; --json equals GET /workers but for the heartbeat', async () => {
    const [text, json] = await Promise.all([stepwise(['workers']), stepwise(['workers', '--json'])]);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    const { header, rows } = tableOf(text.stdout);
    expect(header).toEqual(['WORKER', 'HOST', 'PID', 'VERSION', 'STATE', 'RUNNING', 'TASKS', 'STARTED (UTC)', 'LAST SEEN']);
    const row = rows.find((cells) => cells[0] === worker.id);
    expect(row?.slice(1, 7)).toEqual([os.hostname().slice(0, 30), String(process.pid), VERSION, 'active', '0/8', 'op-approval, op-doomed, op-flaky, op-quick, op-sleepy']);
    expect(row?.[8]).toMatch(/ ago$/);
    const withoutBeat = (w: { last_seen_at: string; running: number }) => ({ ...w, last_seen_at: undefined, running: undefined });
    const answer = JSON.parse(json.stdout) as { workers: { last_seen_at: string; running: number }[] };
    expect(answer.workers.map(withoutBeat)).toEqual((await api.client.listWorkers()).map(withoutBeat));
  });
});

describe('stepwise operator errors and connection', () => {
  test('an error answer is one line, "stepwise: <status> <code>: <message>", on stderr and exit 1', async () => {
    const [missing, unregistered, invalid] = await Promise.all([
      stepwise(['executions', 'get', 'no-such-id']),
      stepwise(['executions', 'schedule', 'op-nobody-serves']),
      stepwise(['executions', 'schedule', 'op-quick', '{"n":"one"}', '--json']),
    ]);
    expect(missing).toMatchObject({ code: 1, stdout: '', stderr: 'stepwise: 404 execution_not_found: execution "no-such-id" was not found\n' });
    expect(unregistered.code).toBe(1);
    expect(unregistered.stderr).toMatch(/^stepwise: 422 task_not_registered: task "op-nobody-serves" is not registered[^\n]*\n$/);
    expect(invalid).toMatchObject({ code: 1, stdout: '' });
    expect(invalid.stderr).toMatch(/^stepwise: 422 invalid_data: data does not match the schema of task "op-quick" \(body\/data\/n: must be integer\)\n$/);
  });

  test('usage errors are one line and exit 2, and send nothing', async () => {
    const before = (await api.client.list()).total;
    const runs = await Promise.all([
      stepwise(['executions', 'list', '--limit', 'many']),
      stepwise(['executions', 'list', '--status', 'sleeping']),
      stepwise(['executions', 'schedule', 'op-quick', '{n:1}']),
      stepwise(['executions', 'schedule', 'op-quick', '[1,2]']),
      stepwise(['executions', 'schedule', 'op-quick', '--data-file', '/nonexistent/data.json']),
      stepwise(['executions', 'wait', 'x', '--timeout', 'soon']),
      stepwise(['executions', 'list', '--created-before', 'yesterday']),
      stepwise(['executions', 'frobnicate']),
      runStepwise(['tasks', 'list', '--url', 'localhost:8080']),
    ]);
    for (const r of runs) {
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^stepwise: [^\n]+\n$/);
    }
    expect(runs.map((r) => r.stderr.trim())).toEqual([
      "stepwise: option '--limit <n>' argument 'many' is invalid. must be an integer, 1 or more (see 'stepwise executions list --help')",
      expect.stringContaining("stepwise: option '--status <status>' argument 'sleeping' is invalid. Allowed choices are pending, running"),
      expect.stringMatching(/^stepwise: DATA is not valid JSON: /),
      'stepwise: the data must be a JSON object, such as \'{"orderId":"A-1"}\'; got [1,2]',
      'stepwise: --data-file /nonexistent/data.json does not exist',
      "stepwise: option '--timeout <seconds>' argument 'soon' is invalid. must be a number of seconds, 0 or more (see 'stepwise executions wait --help')",
      "stepwise: option '--created-before <instant>' argument 'yesterday' is invalid. must be an ISO 8601 instant with a time zone, such as 2024-10-30T00:00:00Z (see 'stepwise executions list --help')",
      "stepwise: unknown command 'frobnicate' (see 'stepwise executions --help')",
      'stepwise: --url must be an http:// or https:// URL, such as http://127.0.0.1:8080; got "localhost:8080"',
    ]);
    expect((await api.client.list()).total).toBe(before);
  });

  test('a server that cannot be reached is one line naming the URL, and exit 3', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const runs = await Promise.all([runStepwise(['executions', 'list', '--url', url]), runStepwise(['executions', 'wait', 'some-id', '--url', url]), runStepwise(['workers', '--json', '--url', url])]);
    for (const r of runs) {
      expect(r).toMatchObject({ code: 3, stdout: '', stderr: `stepwise: cannot reach the Stepwise server at ${url} (ECONNREFUSED)\n` });
    }
  });

  test('STEPWISE_URL chooses the server when --url is not given', async () => {
    const r = await runStepwise(['tasks', 'list', '--json'], { env: { STEPWISE_URL: api.api.url } });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ items: await api.client.listTasks() });
  });

  test('--token or STEPWISE_TOKEN authenticate to a server with API tokens; without one the answer is 401, exit 1', async () => {
    const secured = await startTestApi({ tokens: ['op-secret'] });
    try {
      const url = secured.api.url;
      const [flag, env, none, wrong] = await Promise.all([
        runStepwise(['executions', 'list', '--url', url, '--token', 'op-secret']),
        runStepwise(['executions', 'list', '--url', url, '--json'], { env: { STEPWISE_TOKEN: 'op-secret' } }),
        runStepwise(['executions', 'list', '--url', url]),
        runStepwise(['executions', 'list', '--url', url, '--token', 'not-it'], { env: { STEPWISE_TOKEN: 'op-secret' } }),
      ]);
      expect(flag).toMatchObject({ code: 0, stdout: 'no executions\n', stderr: '' });
      expect(JSON.parse(env.stdout)).toEqual({ executions: [], total: 0, limit: 50, offset: 0, next_cursor: null });
      const refused = 'stepwise: 401 unauthorized: a valid bearer token is required (set --token or STEPWISE_TOKEN)\n';
      expect(none).toMatchObject({ code: 1, stdout: '', stderr: refused });
      expect(wrong).toMatchObject({ code: 1, stdout: '', stderr: refused }); // the flag wins over the environment
    } finally {
      await secured.close();
    }
  });

  test('with worker tokens configured too, a client token still works; a worker token is refused with 403, exit 1', async () => {
    const secured = await startTestApi({ tokens: ['op-secret'], workerTokens: ['worker-secret'] });
    try {
      const url = secured.api.url;
      const [client, tasks, worker] = await Promise.all([
        runStepwise(['executions', 'list', '--url', url], { env: { STEPWISE_TOKEN: 'op-secret' } }),
        runStepwise(['tasks', 'list', '--json', '--url', url, '--token', 'op-secret']),
        runStepwise(['executions', 'list', '--url', url, '--token', 'worker-secret']),
      ]);
      expect(client).toMatchObject({ code: 0, stdout: 'no executions\n', stderr: '' });
      expect(tasks).toMatchObject({ code: 0, stderr: '' });
      expect(JSON.parse(tasks.stdout)).toEqual({ items: [] });
      expect(worker).toMatchObject({ code: 1, stdout: '', stderr: 'stepwise: 403 forbidden: this operation needs a client token (auth.tokens); a worker token may not use it\n' });
    } finally {
      await secured.close();
    }
  });

  test('--version prints the version in package.json, and --help lists the operator commands and exit codes', async () => {
    const [version, help] = await Promise.all([runStepwise(['--version']), runStepwise(['--help'])]);
    expect(version).toMatchObject({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
    expect(help.code).toBe(0);
    for (const command of ['executions', 'events', 'tasks', 'workers']) expect(help.stdout).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    expect(help.stdout).toContain('3  the server cannot be reached at --url');
    const [executions, tasks, bulk] = await Promise.all([runStepwise(['executions', '--help']), runStepwise(['tasks', '--help']), runStepwise(['executions', 'bulk-cancel', '--help'])]);
    for (const command of ['attempts', 'retry', 'bulk-cancel', 'bulk-retry']) expect(executions.stdout).toMatch(new RegExp(`^  ${command} \\[options\\]`, 'm'));
    for (const command of ['pause', 'resume']) expect(tasks.stdout).toMatch(new RegExp(`^  ${command} \\[options\\] <name>`, 'm'));
    expect(bulk.stdout).toContain('A filter is required');
    expect(bulk.stdout).toContain('--yes is required');
  });
});
