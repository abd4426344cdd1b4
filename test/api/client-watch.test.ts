// The typed client's watch() and watchChanges(): every state in order, the end after a terminal one,
// and reconnecting after a dropped connection or a server restart.
import { startApiServer, type ApiServer } from '../../src/api/server';
import { createStepwiseClient, StepwiseApiError, type Execution } from '../../src/client';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/logger';
import { findFreePort } from '../../src/store/embedded';
import { progressAnnouncement } from '../../src/store/progress';
import { recordStepResult } from '../../src/store/steps';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { claimExecution, completeAs, createExecutionIn } from '../helpers/simulated-worker';
import { createTcpProxy } from '../helpers/tcp-proxy';
import { waitUntil } from '../helpers/wait-until';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi({ http: { waitPollIntervalMs: 600000 } });
});
afterAll(async () => {
  await api.close();
});

/** Pulls items from `iterator` into `seen` in the background; `until(n)` waits for the n-th. */
function collect<T>(iterable: AsyncIterable<T>) {
  const seen: T[] = [];
  let error: unknown;
  const done = (async () => {
    try {
      for await (const item of iterable) seen.push(item);
    } catch (err) {
      error = err;
    }
  })();
  return {
    seen,
    done,
    error: () => error,
    until: (n: number, what = `${n} items`) => waitUntil(() => seen.length >= n || error !== undefined, what, 15000, 5).then(() => seen),
  };
}

async function streamsOpen(): Promise<number> {
  const text = (await api.call('GET', '/metrics')).text;
  return Number(/^stepwise_http_streams_open\{stream="execution"\} (\d+)/m.exec(text)?.[1] ?? NaN);
}

test('watch yields the current state, each change, and ends after the terminal one', async () => {
  const e = await createExecutionIn(api.client, api.db, 'pending');
  const watched = collect(api.client.watch(e.id));
  await watched.until(1);
  const lease = await claimExecution(api.db, e.task, e.id);
  await watched.until(2);
  await recordStepResult(api.db, lease, 0, 'one', 1);
  await api.db.raw(progressAnnouncement([e.id]));
  await watched.until(3);
  await completeAs(api.db, lease, 'done');
  await watched.done;
  expect(watched.error()).toBeUndefined();
  expect(watched.seen.map((x) => [x.status, x.steps_completed])).toEqual([
    ['pending', 0],
    ['running', 0],
    ['running', 1],
    ['completed', 1],
  ]);
  expect(watched.seen[3]).toEqual(await api.client.get(e.id));
});

test('watch of an unknown id throws the 404 as StepwiseApiError; a finished one yields once', async () => {
  await expect(api.client.watch('0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10')[Symbol.asyncIterator]().next()).rejects.toMatchObject({
    name: 'StepwiseApiError',
    status: 404,
    code: 'execution_not_found',
  });
  const e = await createExecutionIn(api.client, api.db, 'cancelled');
  const seen: Execution[] = [];
  for await (const x of api.client.watch(e.id)) seen.push(x);
  expect(seen.map((x) => x.status)).toEqual(['cancelled']);
});

test('breaking out of the loop or aborting the signal closes the stream', async () => {
  const e = await createExecutionIn(api.client, api.db, 'waiting');
  for await (const x of api.client.watch(e.id)) {
    expect(x.status).toBe('waiting');
    break;
  }
  await waitUntil(async () => (await streamsOpen()) === 0, 'the stream to close after break');
  const abort = new AbortController();
  const watched = collect(api.client.watch(e.id, { signal: abort.signal }));
  await watched.until(1);
  await waitUntil(async () => (await streamsOpen()) === 1, 'the stream to open');
  abort.abort();
  await watched.done;
  expect(watched.error()).toBeUndefined();
  await waitUntil(async () => (await streamsOpen()) === 0, 'the stream to close after abort');
});

test('watch reconnects after the connection drops and yields the current state again', async () => {
  const proxy = await createTcpProxy({ host: '127.0.0.1', port: api.api.port });
  await proxy.start();
  try {
    const client = createStepwiseClient({ baseUrl: `http://127.0.0.1:${proxy.port}` });
    const e = await createExecutionIn(api.client, api.db, 'running');
    const watched = collect(client.watch(e.id));
    await watched.until(1);
    await proxy.stop(); // cuts the open connection, as a network failure would
    await recordStepResult(api.db, e.lease!, 0, 'while-away', true);
    await new Promise((r) => setTimeout(r, 300));
    expect(watched.error()).toBeUndefined();
    await proxy.start();
    await watched.until(2, 'the state after the reconnect');
    expect(watched.seen[1]).toMatchObject({ status: 'running', steps_completed: 1 });
    await completeAs(api.db, e.lease!, 'after');
    await watched.done;
    expect(watched.seen.map((x) => x.status)).toEqual(['running', 'running', 'completed']);
  } finally {
    await proxy.stop();
  }
});

test('watch follows on through a server restart: the stream ends without a terminal state, and the new server sends the current one', async () => {
  const port = await findFreePort();
  const start = (): Promise<ApiServer> =>
    startApiServer({ config: loadConfig({ env: {}, overrides: { port } }), databaseUrl: api.t.url, db: api.db, log: createLogger({ level: 'silent' }) });
  let server = await start();
  try {
    const client = createStepwiseClient({ baseUrl: server.url });
    const e = await createExecutionIn(api.client, api.db, 'waiting');
    const watched = collect(client.watch(e.id));
    await watched.until(1);
    await server.close();
    server = await start();
    await watched.until(2, 'the current state from the new server');
    expect(watched.seen.map((x) => x.status)).toEqual(['waiting', 'waiting']);
    await api.client.cancel(e.id);
    await watched.done;
    expect(watched.seen.map((x) => x.status)).toEqual(['waiting', 'waiting', 'cancelled']);
  } finally {
    await server.close();
  }
});

test('watchChanges yields sync, then the status changes of the task it follows', async () => {
  const e = await createExecutionIn(api.client, api.db, 'pending');
  const abort = new AbortController();
  const watched = collect(api.client.watchChanges({ task: e.task, signal: abort.signal }));
  await watched.until(1);
  expect(watched.seen[0]).toEqual({ type: 'sync' });
  const lease = await claimExecution(api.db, e.task, e.id);
  // Each event carries the status read when the server heard of the change: complete only once the
  // claim's has been read, or both may read `completed`.
  await waitUntil(() => watched.seen.some((x) => x.type === 'changed'), 'the claim to be seen');
  await completeAs(api.db, lease, null);
  await waitUntil(() => watched.seen.filter((x) => x.type === 'changed').length >= 2, 'two changes');
  expect(watched.seen.flatMap((x) => (x.type === 'changed' ? [x.change.status] : []))).toEqual(['running', 'completed']);
  abort.abort();
  await watched.done;
  expect(watched.error()).toBeUndefined();
});

test('watch answers 401 as StepwiseApiError when the token is wrong', async () => {
  const secured = await startTestApi({ tokens: ['right'] });
  try {
    const e = await createExecutionIn(secured.client, secured.db, 'completed');
    const err = await secured
      .clientWith('wrong')
      .watch(e.id)
      [Symbol.asyncIterator]()
      .next()
      .catch((x: unknown) => x);
    expect(err).toBeInstanceOf(StepwiseApiError);
    expect(err).toMatchObject({ status: 401, code: 'unauthorized' });
  } finally {
    await secured.close();
  }
});
