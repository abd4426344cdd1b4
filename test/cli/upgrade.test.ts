// `stepwise executions upgrade` and `bulk-upgrade`, and task versions in `executions get` and
// `tasks list` (PRODUCT.md §9), as a real process against a real API server and worker.
import { defineTask } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { canRunOnTty, runStepwise, type CliRunOptions } from '../helpers/stepwise-cli';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

// Every command is a new Node process that loads the CLI from TypeScript: about 1.5 s of CPU each.
jest.setTimeout(120_000);

const checkout = defineTask({
  name: 'cv-checkout',
  version: '2',
  async run(ctx) {
    await ctx.step('reserve', () => 1);
    await ctx.sleep('settle', '1h');
    return 'done';
  },
});

const quick = defineTask({
  name: 'cv-quick',
  async run(ctx) {
    return ctx.step('compute', () => 42);
  },
});

/** An execution id nobody scheduled. */
const UNKNOWN_ID = '01a21c22-0000-7000-8000-000000000000';

let api: TestApi;
let worker: Worker;

beforeAll(async () => {
  api = await startTestApi();
  worker = await startWorker(api.t, [checkout, quick] as never);
});
afterAll(async () => {
  await worker.stop();
  await api.close();
});

function stepwise(args: string[], options?: CliRunOptions) {
  return runStepwise([...args, '--url', api.api.url], options);
}

/** Schedules `count` checkouts and waits until each sleeps, pinned to version 2. */
async function sleepers(count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) ids.push((await api.client.schedule('cv-checkout')).execution_id);
  await waitUntil(async () => (await Promise.all(ids.map((id) => api.client.get(id)))).every((x) => x.status === 'waiting'), 'the checkouts to sleep');
  return ids;
}

/** Pins executions to a version no worker serves, as a deploy that stopped its last worker leaves them. */
async function pinTo(version: string, ids: readonly string[]): Promise<void> {
  for (const id of ids) await api.db.raw('UPDATE stepwise.executions SET task_version = ? WHERE id = ?', [version, id]);
}

/** The VERSIONS cell of a task's row in `tasks list`. */
async function versionsCell(task: string): Promise<string | undefined> {
  const { stdout } = await stepwise(['tasks', 'list']);
  const [header, ...rows] = stdout.trimEnd().split('\n').map((line) => line.trim().split(/\s{2,}/));
  return rows.find((cells) => cells[0] === task)?.[header.indexOf('VERSIONS')];
}

/** Leaves no checkout in flight for the next test's counts. */
async function cancelAll(ids: readonly string[]): Promise<void> {
  for (const id of ids) await api.client.cancel(id);
}

describe('stepwise executions upgrade', () => {
  test("an unknown execution, a finished one, or a version nobody serves is the API's one line and exit 1", async () => {
    const { execution_id: done } = await api.client.schedule('cv-quick');
    await api.client.wait(done, { deadlineMs: 10_000 });
    const [waiting] = await sleepers(1);
    const [unknown, finished, unserved] = await Promise.all([
      stepwise(['executions', 'upgrade', UNKNOWN_ID, '--to', '2']),
      stepwise(['executions', 'upgrade', done, '--to-unversioned']),
      stepwise(['executions', 'upgrade', waiting, '--to', '9']),
    ]);
    expect(unknown).toMatchObject({ code: 1, stdout: '' });
    expect(unknown.stderr).toMatch(/^stepwise: 404 execution_not_found: .+\n$/);
    expect(finished).toMatchObject({ code: 1, stdout: '' });
    expect(finished.stderr).toMatch(new RegExp(`^stepwise: 409 execution_not_upgradable: .*${done}.*\\n$`));
    expect(unserved).toMatchObject({ code: 1, stdout: '' });
    expect(unserved.stderr).toMatch(/^stepwise: 409 task_version_not_served: .*"9".*\n$/);
    await expect(api.client.get(waiting)).resolves.toMatchObject({ status: 'waiting', task_version: '2' });
    await cancelAll([waiting]);
  });

  test('without a version, with both, or with one the contract refuses, it is a usage error (exit 2) and nothing is sent', async () => {
    const [none, both, bad] = await Promise.all([
      stepwise(['executions', 'upgrade', UNKNOWN_ID]),
      stepwise(['executions', 'upgrade', UNKNOWN_ID, '--to', '2', '--to-unversioned']),
      stepwise(['executions', 'upgrade', UNKNOWN_ID, '--to', 'two words']),
    ]);
    expect(none).toMatchObject({ code: 2, stdout: '', stderr: 'stepwise: say which version to move to: --to <version>, or --to-unversioned for the task defined without one\n' });
    expect(both).toMatchObject({ code: 2, stderr: 'stepwise: give either --to or --to-unversioned, not both\n' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("option '--to <version>' argument 'two words' is invalid");
  });

  test('moves an execution off a version nobody serves; get shows its version, tasks list the versions with what is in flight', async () => {
    const [id] = await sleepers(1);
    const before = await stepwise(['executions', 'get', id]);
    expect(before.stdout).toMatch(/^task version\s+2$/m);
    await expect(versionsCell('cv-checkout')).resolves.toBe('2* (1w, 1 in flight)');
    // An unversioned task has nothing to show.
    await expect(versionsCell('cv-quick')).resolves.toBe('–');

    await pinTo('1', [id]);
    await expect(versionsCell('cv-checkout')).resolves.toBe('2* (1w) · 1 (0w, 1 in flight!)');
    const moved = await stepwise(['executions', 'upgrade', id, '--to', '2']);
    expect(moved).toMatchObject({ code: 0, stderr: '', stdout: `upgraded execution ${id} from version 1 to version 2 (waiting)\n` });
    const again = await stepwise(['executions', 'upgrade', id, '--to', '2', '--json']);
    expect(JSON.parse(again.stdout)).toEqual({ execution_id: id, status: 'waiting', task_version: '2', previous_task_version: '2' });
    await expect(versionsCell('cv-checkout')).resolves.toBe('2* (1w, 1 in flight)');
    await cancelAll([id]);
  });
});

describe('stepwise executions bulk-upgrade', () => {
  test("moves the executions pinned to one version; off a terminal only with --yes; a version nobody serves is the API's 409", async () => {
    const ids = await sleepers(2);
    await pinTo('1', ids);
    const args = ['executions', 'bulk-upgrade', '--task', 'cv-checkout', '--from', '1', '--to', '2'];
    const unasked = await stepwise(args);
    expect(unasked).toMatchObject({ code: 2, stderr: 'stepwise: bulk-upgrade asks before it acts, but stdin is not a terminal: add --yes to upgrade without asking\n' });
    const unserved = await stepwise(['executions', 'bulk-upgrade', '--task', 'cv-checkout', '--from', '1', '--to', '9', '--yes']);
    expect(unserved.code).toBe(1);
    expect(unserved.stderr).toMatch(/^stepwise: 409 task_version_not_served: /);

    const done = await stepwise([...args, '--yes']);
    expect(done).toMatchObject({ code: 0, stderr: '', stdout: 'matched 2, changed 2\n' });
    for (const id of ids) await expect(api.client.get(id)).resolves.toMatchObject({ status: 'waiting', task_version: '2' });
    await cancelAll(ids);
  });

  (canRunOnTty ? test : test.skip)('on a terminal it counts what is pinned to the version and asks first', async () => {
    const ids = await sleepers(2);
    await pinTo('1', ids);
    const declined = await stepwise(['executions', 'bulk-upgrade', '--task', 'cv-checkout', '--from', '1', '--to', '2'], { tty: true, stdin: 'n\n' });
    expect(declined.code).toBe(1);
    expect(declined.stdout).toBe(
      '2 pending, waiting or running executions of task cv-checkout on version 1 match. Upgrade them to version 2? [y/N] stepwise: not confirmed: nothing was upgraded\n',
    );
    await expect(api.client.get(ids[0])).resolves.toMatchObject({ task_version: '1' });
    await cancelAll(ids);
  });
});
