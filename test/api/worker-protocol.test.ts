// The worker protocol (openapi.yaml, tag "Worker protocol"; docs/worker-protocol.md) over real HTTP:
// each route, the lease fencing of every write, repeats, bad input, cancels heard by heartbeat, and a
// remote worker cut off while its lease expires. Every answer is checked against openapi.yaml.
import { randomUUID } from 'node:crypto';
import createClient from 'openapi-fetch';
import type { components, paths } from '../../generated/openapi';
import { defineTask } from '../../src/index';
import { queryRows } from '../../src/store/db';
import { getExecution } from '../../src/store/executions';
import { loadSteps } from '../../src/store/steps';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { uniqueTask } from '../helpers/simulated-worker';
import { createTcpProxy } from '../helpers/tcp-proxy';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';
import { Worker } from '../../src/engine/worker';
import { quietLog } from '../helpers/worker';

type Schemas = components['schemas'];
type Activation = Schemas['Activation'];

const VALUE_BYTES = 2000;
let api: TestApi;
let wp: ReturnType<typeof createClient<paths>>;

beforeAll(async () => {
  api = await startTestApi({ limits: { valueBytes: VALUE_BYTES } });
  wp = createClient<paths>({ baseUrl: api.api.url, fetch: api.fetch });
});
afterAll(async () => {
  await api.close();
});

/** Registers a worker of `tasks` (names, or definitions) and returns its id. */
async function register(tasks: Array<string | Schemas['WorkerTask']>, workerId = randomUUID()): Promise<string> {
  const { data } = await wp.POST('/api/v1/worker/register', { body: { worker_id: workerId, concurrency: 4, tasks: tasks.map((t) => (typeof t === 'string' ? { name: t } : t)) } });
  expect(data?.worker_id).toBe(workerId);
  return workerId;
}

async function claim(workerId: string, task: string, options: Partial<Schemas['ClaimRequest']> = {}): Promise<Schemas['ClaimAnswer']> {
  const { data, error } = await wp.POST('/api/v1/worker/claim', { body: { worker_id: workerId, tasks: [{ name: task }], max: 8, wait_ms: 0, ...options } });
  if (!data) throw new Error(`claim failed: ${JSON.stringify(error)}`);
  return data;
}

/** Schedules one execution of `task` and claims it as `workerId`. */
async function scheduleAndClaim(workerId: string, task: string, data: Record<string, unknown> = {}): Promise<Activation> {
  const scheduled = await api.client.schedule(task, data);
  const answer = await claim(workerId, task, { wait_ms: 5000 });
  const activation = answer.activations.find((a) => a.execution_id === scheduled.execution_id);
  if (!activation) throw new Error('the scheduled execution was not claimed');
  return activation;
}

const leaseOf = (a: Activation) => ({ execution_id: a.execution_id, lease_token: a.lease_token });
const now = () => new Date().toISOString();

async function row(id: string) {
  const e = await getExecution(api.db, id);
  if (!e) throw new Error(`no execution ${id}`);
  return e;
}

/** Waits until `n` claims of remote workers are parked on the server (its gauge of them). */
async function claimsWaiting(n: number): Promise<void> {
  await waitUntil(async () => new RegExp(`^stepwise_worker_claims_waiting ${n}$`, 'm').test(await (await api.call('GET', '/metrics')).text), `${n} claims to wait`);
}

/** What a fenced write must leave alone: the execution's row and its history. */
async function snapshot(id: string) {
  const e = await row(id);
  return { status: e.status, stepsCompleted: e.stepsCompleted, currentStep: e.currentStep, output: e.output, error: e.error, steps: await loadSteps(api.db, id) };
}

describe('register and heartbeat', () => {
  test('a registration records the worker and its tasks: schemas, flow control and version apply', async () => {
    const task = uniqueTask('wp-reg');
    const workerId = await register([
      { name: task, version: '7', data_schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }, concurrency: { limit: 2, key: '/tenant' }, retry: { max_attempts: 4, initial_delay_ms: 10, max_delay_ms: 100, factor: 2 } },
    ]);
    const { data: workers } = await api.client.raw.GET('/api/v1/workers');
    expect(workers?.workers.find((w) => w.worker_id === workerId)).toMatchObject({ tasks: [task], task_versions: { [task]: '7' }, concurrency: 4, state: 'active' });
    const { data: tasks } = await api.client.raw.GET('/api/v1/tasks');
    expect(tasks?.items.find((t) => t.name === task)).toMatchObject({ concurrency: { limit: 2, key: '/tenant' } });
    const bad = await api.client.raw.POST('/api/v1/executions', { body: { task, data: { n: 'x' } } });
    expect(bad.error?.error.code).toBe('invalid_data');
  });

  test('a registration with a bad flow key, cron or schema answers 422 naming each, and registers nothing', async () => {
    const task = uniqueTask('wp-bad');
    const { error, response } = await wp.POST('/api/v1/worker/register', {
      body: {
        worker_id: randomUUID(),
        concurrency: 1,
        tasks: [{ name: task, concurrency: { limit: 1, key: 'tenant' }, cron: { pattern: 'every day' }, data_schema: { type: 'no-such-type' } }],
      },
    });
    expect(response.status).toBe(422);
    expect(error?.error.code).toBe('invalid_data');
    expect(error?.error.details?.map((d) => d.path).sort()).toEqual([`body/tasks/0`, `body/tasks/0/cron`, `body/tasks/0/data_schema`]);
    expect(await queryRows(api.db, 'SELECT 1 FROM stepwise.tasks WHERE name = ?', [task])).toEqual([]);
  });

  test('stopping and stopped move the worker in the registry; an unknown worker is told to register', async () => {
    const workerId = await register([uniqueTask('wp-life')]);
    const state = async () => (await api.client.raw.GET('/api/v1/workers')).data?.workers.find((w) => w.worker_id === workerId)?.state;
    const beat = async (body: Partial<Schemas['WorkerHeartbeat']>) => (await wp.POST('/api/v1/worker/heartbeat', { body: { worker_id: workerId, running: 0, ...body } })).data;
    expect(await beat({ running: 1 })).toMatchObject({ registered: true, renewed: [], lost: [] });
    await beat({ state: 'stopping' });
    expect(await state()).toBe('stopping');
    expect(await beat({ state: 'stopped' })).toMatchObject({ registered: false });
    expect(await state()).toBeUndefined();
    expect((await beat({})) ?? {}).toMatchObject({ registered: false, starting: [] });
  });
});

describe('claim', () => {
  test('an activation carries the lease and, on a resume, the history a replay needs', async () => {
    const task = uniqueTask('wp-claim');
    const workerId = await register([task]);
    const first = await scheduleAndClaim(workerId, task, { order: 1 });
    expect(first).toMatchObject({ task, data: { order: 1 }, attempt: 1, previous_status: 'pending', steps_completed: 0, history: [], task_version: null });
    expect(await row(first.execution_id)).toMatchObject({ status: 'running' });
    const steps = await wp.POST('/api/v1/worker/steps', { body: { items: [{ ...leaseOf(first), seq: 0, name: 'load', result: { id: 7 }, started_at: now() }] } });
    expect(steps.data?.results).toEqual([{ status: 200 }]);
    const suspended = await wp.POST('/api/v1/worker/suspend', { body: { items: [{ ...leaseOf(first), waits: [{ seq: 1, name: 'go', kind: 'event', event_name: 'go', wake_at: null }] }] } });
    expect(suspended.data?.results).toEqual([{ status: 200, wake_at: null, due_in_ms: null }]);
    expect(await row(first.execution_id)).toMatchObject({ status: 'waiting' });
    await api.client.sendEvent(first.execution_id, 'go', { yes: true });
    const again = (await claim(workerId, task, { wait_ms: 5000 })).activations[0];
    expect(again).toMatchObject({ execution_id: first.execution_id, previous_status: 'waiting', attempt: 1, steps_completed: 2 });
    expect(again.lease_token).not.toBe(first.lease_token);
    expect(again.history.map((h) => [h.seq, h.name, h.kind, h.completed, h.result])).toEqual([
      [0, 'load', 'step', true, { id: 7 }],
      [1, 'go', 'event', true, { payload: { yes: true } }],
    ]);
  });

  test('a claim for a task nobody registered answers 422 task_not_registered', async () => {
    const { error, response } = await wp.POST('/api/v1/worker/claim', { body: { worker_id: randomUUID(), tasks: [{ name: uniqueTask('nobody') }], max: 1, wait_ms: 0 } });
    expect(response.status).toBe(422);
    expect(error?.error.code).toBe('task_not_registered');
  });

  test('a long-poll waits for work and answers when it is scheduled; an idle one answers empty at wait_ms', async () => {
    const task = uniqueTask('wp-poll');
    const workerId = await register([task]);
    expect((await claim(workerId, task, { wait_ms: 200 })).activations).toEqual([]);
    const waiting = claim(workerId, task, { wait_ms: 10_000 });
    await claimsWaiting(1);
    const scheduled = await api.client.schedule(task, {});
    const answer = await waiting;
    expect(answer.activations.map((a) => a.execution_id)).toEqual([scheduled.execution_id]);
    expect(answer.waited_ms).toBeGreaterThan(0);
    await claimsWaiting(0);
  });

  test('claims of several workers waiting at once are filled by one claim statement, each within its room', async () => {
    const task = uniqueTask('wp-fill');
    const workers = await Promise.all([1, 2, 3].map(() => register([task])));
    const waiting = workers.map((w) => claim(w, task, { wait_ms: 10_000, max: 2 }));
    // The three claims are parked on the server before the work arrives.
    await claimsWaiting(3);
    const ids = await queryRows<{ id: string }>(
      api.db,
      `INSERT INTO stepwise.executions (id, task, status, data, due_at) SELECT gen_random_uuid(), ?, 'pending', '{}', now() FROM generate_series(1, 6)
       RETURNING id`,
      [task],
    );
    await queryRows(api.db, `SELECT pg_notify('stepwise_work', ?)`, [task]);
    const answers = await Promise.all(waiting);
    expect(answers.map((a) => a.activations.length)).toEqual([2, 2, 2]);
    const claimed = await queryRows<{ worker_id: string; started_at: Date; id: string }>(api.db, 'SELECT id, worker_id, started_at FROM stepwise.executions WHERE id = ANY(?::uuid[])', [ids.map((i) => i.id)]);
    // One statement, one now(): every execution started at the same instant, leased to the worker it went to.
    expect(new Set(claimed.map((c) => c.started_at.getTime())).size).toBe(1);
    answers.forEach((a, i) => {
      for (const act of a.activations) expect(claimed.find((c) => c.id === act.execution_id)?.worker_id).toBe(workers[i]);
    });
  });
});

/** Every write of the protocol, as one item for the execution `a` (under the lease given). */
function writes(lease: { execution_id: string; lease_token: string }) {
  return {
    steps: () => wp.POST('/api/v1/worker/steps', { body: { items: [{ ...lease, seq: 0, name: 's', result: 1, started_at: now() }] } }),
    stepFailures: () => wp.POST('/api/v1/worker/step-failures', { body: { items: [{ ...lease, seq: 0, name: 's', attempt: 1, error: { type: 'Error', message: 'no', retryable: false }, started_at: now(), final: true }] } }),
    timeouts: () => wp.POST('/api/v1/worker/timeouts', { body: { items: [{ ...lease, seq: 0, ends: 'sleep' }] } }),
    currentSteps: () => wp.POST('/api/v1/worker/current-steps', { body: { items: [{ ...lease, name: 's' }] } }),
    children: (task: string) => wp.POST('/api/v1/worker/children', { body: { items: [{ ...lease, seq: 0, name: 'c', task, data: {}, detached: true }] } }),
    suspend: () => wp.POST('/api/v1/worker/suspend', { body: { items: [{ ...lease, waits: [{ seq: 0, name: 'nap', kind: 'sleep', wake_at: new Date(Date.now() + 60_000).toISOString() }] }] } }),
    closedWaits: () => wp.POST('/api/v1/worker/closed-waits', { body: { items: [{ ...lease, seqs: [0] }] } }),
    complete: () => wp.POST('/api/v1/worker/complete', { body: { items: [{ ...lease, output: 'done' }] } }),
    fail: () => wp.POST('/api/v1/worker/fail', { body: { items: [{ ...lease, error: { type: 'Error', message: 'no', retryable: false }, retry_in_ms: null }] } }),
    release: () => wp.POST('/api/v1/worker/release', { body: { items: [lease] } }),
    returnUnstarted: () => wp.POST('/api/v1/worker/release', { body: { items: [{ ...lease, previous_status: 'pending' }] } }),
  };
}

describe('fencing', () => {
  test.each(['forged', 'another execution\'s'] as const)('every write under a %s lease answers 409 lease_lost for its item and changes nothing', async (kind) => {
    const task = uniqueTask('wp-fence');
    const workerId = await register([task]);
    const target = await scheduleAndClaim(workerId, task);
    const other = await scheduleAndClaim(workerId, task);
    const lease = { execution_id: target.execution_id, lease_token: kind === 'forged' ? randomUUID() : other.lease_token };
    const before = await snapshot(target.execution_id);
    const w = writes(lease);
    for (const [name, write] of Object.entries(w)) {
      const { data } = await (write as (t: string) => ReturnType<typeof w.steps>)(task);
      expect([name, data?.results]).toEqual([name, [{ status: 409, error: { code: 'lease_lost', message: expect.stringContaining(target.execution_id) } }]]);
    }
    expect(await snapshot(target.execution_id)).toEqual(before);
    expect(await queryRows(api.db, 'SELECT 1 FROM stepwise.executions WHERE parent_id = ?', [target.execution_id])).toEqual([]);
  });

  test('a lease reused after its execution finished is refused, and so is a stale one after a takeover', async () => {
    const task = uniqueTask('wp-stale');
    const a = await register([task]);
    const b = await register([task]);
    const stale = await scheduleAndClaim(a, task);
    await new Promise((r) => setTimeout(r, 10));
    // The lease lapses (never renewed), and worker b takes the execution over.
    await queryRows(api.db, `UPDATE stepwise.executions SET due_at = now() - interval '1 second' WHERE id = ?`, [stale.execution_id]);
    const taken = (await claim(b, task, { wait_ms: 5000 })).activations[0];
    expect(taken).toMatchObject({ execution_id: stale.execution_id, previous_status: 'running', attempt: 2 });
    const staleWrites = writes(leaseOf(stale));
    expect((await staleWrites.steps()).data?.results[0]).toMatchObject({ status: 409, error: { code: 'lease_lost' } });
    expect((await staleWrites.complete()).data?.results[0]).toMatchObject({ status: 409, error: { code: 'lease_lost' } });
    expect((await writes(leaseOf(taken)).complete()).data?.results).toEqual([{ status: 200 }]);
    // Reused once finished: refused, and the output is the taker's.
    expect((await writes(leaseOf(taken)).fail()).data?.results[0]).toMatchObject({ status: 409 });
    expect(await row(stale.execution_id)).toMatchObject({ status: 'completed', output: 'done', stepsCompleted: 0 });
  });

  test('a value over the limit answers 422 invalid_data for its item; the rest of the batch lands', async () => {
    const task = uniqueTask('wp-big');
    const workerId = await register([task]);
    const a = await scheduleAndClaim(workerId, task);
    const big = 'x'.repeat(VALUE_BYTES + 1);
    const { data } = await wp.POST('/api/v1/worker/steps', {
      body: { items: [{ ...leaseOf(a), seq: 0, name: 'big', result: big, started_at: now() }, { ...leaseOf(a), seq: 1, name: 'small', result: 1, started_at: now() }] },
    });
    expect(data?.results).toEqual([{ status: 422, error: { code: 'invalid_data', message: expect.any(String), details: [{ path: 'body/items/0/result', message: expect.stringContaining(`over the limit of ${VALUE_BYTES}`) }] } }, { status: 200 }]);
    expect((await loadSteps(api.db, a.execution_id)).map((s) => s.name)).toEqual(['small']);
    const output = await wp.POST('/api/v1/worker/complete', { body: { items: [{ ...leaseOf(a), output: big }] } });
    expect(output.data?.results[0]).toMatchObject({ status: 422, error: { code: 'invalid_data' } });
    expect(await row(a.execution_id)).toMatchObject({ status: 'running' });
  });

  test('a child of a task nobody registered, or with data its schema refuses, answers 422 for its item', async () => {
    const task = uniqueTask('wp-parent');
    const child = uniqueTask('wp-child');
    const workerId = await register([task, { name: child, data_schema: { type: 'object', required: ['n'] } }]);
    const a = await scheduleAndClaim(workerId, task);
    const { data } = await wp.POST('/api/v1/worker/children', {
      body: {
        items: [
          { ...leaseOf(a), seq: 0, name: 'c0', task: uniqueTask('nobody'), data: {}, detached: true },
          { ...leaseOf(a), seq: 1, name: 'c1', task: child, data: {}, detached: true },
          { ...leaseOf(a), seq: 2, name: 'c2', task: child, data: { n: 1 }, detached: true },
        ],
      },
    });
    expect(data?.results.map((r) => ('error' in r ? r.error.code : r.status))).toEqual(['task_not_registered', 'invalid_data', 200]);
    expect((await loadSteps(api.db, a.execution_id)).map((s) => s.name)).toEqual(['c2']);
  });
});

describe('repeats', () => {
  test('every write sent again after a lost answer answers the same, and lands once', async () => {
    const task = uniqueTask('wp-again');
    const child = uniqueTask('wp-again-child');
    const workerId = await register([task, child]);
    const a = await scheduleAndClaim(workerId, task);
    const lease = leaseOf(a);
    const twice = async <T>(send: () => Promise<{ data?: T }>) => {
      const first = (await send()).data;
      const second = (await send()).data;
      expect(second).toEqual(first);
      return first;
    };
    await twice(() => wp.POST('/api/v1/worker/steps', { body: { items: [{ ...lease, seq: 0, name: 'once', result: 'v', started_at: now() }] } }));
    await twice(() => wp.POST('/api/v1/worker/step-failures', { body: { items: [{ ...lease, seq: 1, name: 'flaky', attempt: 1, error: { type: 'Error', message: 'no', retryable: false }, started_at: now(), final: true }] } }));
    const started = await twice(() => wp.POST('/api/v1/worker/children', { body: { items: [{ ...lease, seq: 2, name: 'kid', task: child, data: {}, detached: true }] } }));
    expect(started?.results[0]).toMatchObject({ status: 200, child_execution_id: expect.any(String) });
    await twice(() => wp.POST('/api/v1/worker/current-steps', { body: { items: [{ ...lease, name: 'x' }] } }));
    const suspended = await twice(() => wp.POST('/api/v1/worker/suspend', { body: { items: [{ ...lease, waits: [{ seq: 3, name: 'nap', kind: 'sleep', wake_at: new Date(Date.now() + 60_000).toISOString() }] }] } }));
    expect(suspended?.results[0]).toMatchObject({ status: 200, due_in_ms: expect.any(Number) });
    const steps = await loadSteps(api.db, a.execution_id);
    expect(steps.map((s) => [s.name, s.failures.length])).toEqual([['once', 0], ['flaky', 1], ['kid', 0], ['nap', 0]]);
    expect(await row(a.execution_id)).toMatchObject({ status: 'waiting', stepsCompleted: 2 });
    expect(await queryRows(api.db, 'SELECT 1 FROM stepwise.executions WHERE parent_id = ?', [a.execution_id])).toHaveLength(1);

    for (const finish of ['complete', 'fail', 'release', 'returnUnstarted'] as const) {
      const b = await scheduleAndClaim(workerId, task);
      const answer = await twice(() => writes(leaseOf(b))[finish]());
      expect([finish, answer?.results]).toEqual([finish, [{ status: 200 }]]);
    }
  });
});

describe('heartbeat and leases', () => {
  test('renews the leases named; a cancelled execution answers cancelled, a lease that does not hold answers lost', async () => {
    const task = uniqueTask('wp-beat');
    const workerId = await register([task]);
    const kept = await scheduleAndClaim(workerId, task);
    const cancelled = await scheduleAndClaim(workerId, task);
    const dueBefore = (await queryRows<{ due_at: Date }>(api.db, 'SELECT due_at FROM stepwise.executions WHERE id = ?', [kept.execution_id]))[0].due_at;
    await api.client.cancel(cancelled.execution_id);
    const forged = { execution_id: kept.execution_id, lease_token: randomUUID() };
    const { data } = await wp.POST('/api/v1/worker/heartbeat', { body: { worker_id: workerId, running: 2, lease_ms: 120_000, leases: [leaseOf(kept), leaseOf(cancelled)] } });
    expect(data).toMatchObject({ registered: true, renewed: [kept.execution_id], lost: [{ execution_id: cancelled.execution_id, reason: 'cancelled' }] });
    const dueAfter = (await queryRows<{ due_at: Date }>(api.db, 'SELECT due_at FROM stepwise.executions WHERE id = ?', [kept.execution_id]))[0].due_at;
    expect(dueAfter.getTime()).toBeGreaterThan(dueBefore.getTime() + 60_000);
    const other = await wp.POST('/api/v1/worker/heartbeat', { body: { worker_id: workerId, running: 1, leases: [forged] } });
    expect(other.data).toMatchObject({ renewed: [], lost: [{ execution_id: kept.execution_id, reason: 'lost' }] });
  });

  test('a remote worker hears of a cancel at its next renewal: the handler stops and its late result is discarded', async () => {
    const task = uniqueTask('wp-cancel');
    let aborted: unknown;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const worker = new Worker({
      remote: { url: api.api.url },
      log: quietLog,
      leaseMs: 1500,
      tasks: [
        defineTask({
          name: task,
          async run(ctx) {
            ctx.signal.addEventListener('abort', () => (aborted = ctx.signal.reason));
            await ctx.step('hang', async () => {
              await gate;
              return 'late';
            });
            return 'unreachable';
          },
        }) as never,
      ],
    });
    await worker.start();
    try {
      const { execution_id } = await api.client.schedule(task, {});
      await waitUntil(async () => (await row(execution_id)).status === 'running');
      await api.client.cancel(execution_id);
      await waitUntil(() => aborted, 'the handler to be aborted');
      expect((aborted as Error).name).toBe('ExecutionCancelledError');
      release();
      await waitUntil(() => worker.busy === 0, 'the slot to be free');
      expect(await snapshot(execution_id)).toMatchObject({ status: 'cancelled', steps: [] });
    } finally {
      release();
      await worker.stop();
    }
  });

  test('a lease that expires while a remote worker is cut off is taken over; the stale worker writes nothing', async () => {
    const task = uniqueTask('wp-cut');
    const ran: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const def = defineTask({
      name: task,
      async run(ctx) {
        const value = await ctx.step('work', async () => {
          ran.push(`attempt ${ctx.attempt}`);
          if (ctx.attempt === 1) {
            await gate;
            return 'stale';
          }
          return 'fresh';
        });
        return value;
      },
    });
    const target = new URL(api.api.url);
    const proxy = await createTcpProxy({ host: target.hostname, port: Number(target.port) });
    await proxy.start();
    const cutOff = new Worker({ remote: { url: `http://127.0.0.1:${proxy.port}` }, log: quietLog, leaseMs: 1500, tasks: [def as never] });
    await cutOff.start();
    let taker: Worker | undefined;
    try {
      const { execution_id } = await api.client.schedule(task, {});
      await waitUntil(() => ran.length === 1, 'the first attempt to start');
      await proxy.stop();
      taker = await startWorker(api.t, [def as never], { leaseMs: 1500 });
      const done = await api.client.wait(execution_id, { timeoutSeconds: 20 });
      expect(done).toMatchObject({ status: 'completed', output: 'fresh' });
      expect(ran).toEqual(['attempt 1', 'attempt 2']);
      // The cut-off worker comes back and its step finishes: nothing of it is recorded.
      await proxy.start();
      release();
      await waitUntil(() => cutOff.busy === 0, 'the stale handler to be let go');
      const steps = await loadSteps(api.db, execution_id);
      expect(steps.map((s) => [s.name, s.result])).toEqual([['work', 'fresh']]);
      expect(await row(execution_id)).toMatchObject({ status: 'completed', output: 'fresh', attempt: 2 });
      const attempts = await api.client.raw.GET('/api/v1/executions/{id}/attempts', { params: { path: { id: execution_id } } });
      expect(attempts.data?.attempts.map((a) => a.outcome)).toEqual(['lost', 'completed']);
    } finally {
      release();
      await proxy.start().catch(() => undefined);
      await Promise.all([cutOff.stop(), taker?.stop()]);
      await proxy.stop();
    }
  });
});

describe('cron fires', () => {
  test('the first worker to send a fire time schedules it; the others find the same execution', async () => {
    const task = uniqueTask('wp-cron');
    await register([{ name: task, cron: { pattern: '0 * * * *' } }]);
    const fireAt = '2030-01-01T00:00:00.000Z';
    const first = await wp.POST('/api/v1/worker/cron-fires', { body: { items: [{ task, fire_at: fireAt, data: { n: 1 } }, { task: uniqueTask('nobody'), fire_at: fireAt }] } });
    expect(first.data?.results).toEqual([
      { status: 200, execution_id: expect.any(String), created: true, task },
      { status: 422, error: { code: 'task_not_registered', message: expect.any(String) } },
    ]);
    const second = await wp.POST('/api/v1/worker/cron-fires', { body: { items: [{ task, fire_at: fireAt, data: { n: 1 } }] } });
    const id = (first.data?.results[0] as Schemas['CronFired']).execution_id;
    expect(second.data?.results).toEqual([{ status: 200, execution_id: id, created: false, task }]);
    expect(await row(id)).toMatchObject({ status: 'pending', data: { n: 1 } });
  });
});
