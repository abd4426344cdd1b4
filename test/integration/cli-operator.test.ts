// The operator commands (executions, events, tasks, workers) as a real process against a real API
// server and worker: human output, --json against the API's own answers, errors and exit codes.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { defineTask, NonRetryableError, Type } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { closedPort, runStepwise, type CliRunOptions } from '../helpers/stepwise-cli';
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

  test('list prints aligned ID, TASK, STATUS, CREATED, DURATION columns and filters by --status and --task', async () => {
    const { execution_id: done } = await api.client.schedule('op-quick', { n: 5 });
    const { execution_id: asleep } = await api.client.schedule('op-sleepy');
    await statusOf(done, 'completed');
    await statusOf(asleep, 'waiting');

    const r = await stepwise(['executions', 'list', '--task', 'op-quick', '--status', 'completed']);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const { header, rows, lines } = tableOf(r.stdout);
    expect(header).toEqual(['ID', 'TASK', 'STATUS', 'CREATED (UTC)', 'DURATION']);
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
    expect(text.stdout).toMatch(/^created +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(.+ ago\)$/m);
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
    expect(header).toEqual(['NAME', 'WORKERS', 'PENDING', 'RUNNING', 'WAITING', 'COMPLETED', 'FAILED', 'CANCELLED', 'LIMIT', 'CRON']);
    const tasks = await api.client.listTasks();
    expect(rows.map((cells) => cells[0])).toEqual(tasks.map((t) => t.name));
    const doomedTask = tasks.find((t) => t.name === 'op-doomed');
    expect(rows.find((cells) => cells[0] === 'op-doomed')).toEqual(['op-doomed', '1', '0', '0', '0', '0', String(doomedTask?.counts.failed), '0', '–', '–']);
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
      stepwise(['executions', 'frobnicate']),
      runStepwise(['tasks', 'list', '--url', 'localhost:8080']),
    ]);
    for (const r of runs) {
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^stepwise: [^\n]+\n$/);
    }
    expect(runs.map((r) => r.stderr.trim())).toEqual([
      "stepwise: option '--limit <n>' argument 'many' is invalid. must be an integer, 1 or more",
      expect.stringContaining("stepwise: option '--status <status>' argument 'sleeping' is invalid. Allowed choices are pending, running"),
      expect.stringMatching(/^stepwise: DATA is not valid JSON: /),
      'stepwise: the data must be a JSON object, such as \'{"orderId":"A-1"}\'; got [1,2]',
      'stepwise: --data-file /nonexistent/data.json does not exist',
      "stepwise: option '--timeout <seconds>' argument 'soon' is invalid. must be a number of seconds, 0 or more",
      "stepwise: unknown command 'frobnicate'",
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
      expect(JSON.parse(env.stdout)).toEqual({ executions: [], total: 0, limit: 50, offset: 0 });
      const refused = 'stepwise: 401 unauthorized: a valid bearer token is required (set --token or STEPWISE_TOKEN)\n';
      expect(none).toMatchObject({ code: 1, stdout: '', stderr: refused });
      expect(wrong).toMatchObject({ code: 1, stdout: '', stderr: refused }); // the flag wins over the environment
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
  });
});
