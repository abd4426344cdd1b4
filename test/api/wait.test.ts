// The long-poll: NOTIFY-driven fan-out, the fallback re-check, client hang-ups and Node's timeouts.
import { EventEmitter } from 'node:events';
import net from 'node:net';
import { recordResponse } from '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { completeAs, createExecutionIn } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { ExecutionWaiters } from '../../src/api/execution-waiters';
import { createLogger } from '../../src/logger';
import { CHANNEL_CHANGED } from '../../src/store/channels';
import { insertExecutions } from '../../src/store/executions';

async function longPollsWaiting(api: TestApi): Promise<number> {
  const res = await api.call('GET', '/metrics');
  const match = /^stepwise_http_long_polls_waiting (\d+)/m.exec(res.text);
  return Number(match?.[1] ?? NaN);
}

describe('long-poll over HTTP', () => {
  let api: TestApi;
  beforeAll(async () => {
    // A fallback interval far beyond the test's waits: only a NOTIFY can end these long-polls in time.
    api = await startTestApi({ http: { waitPollIntervalMs: 600000 } });
  });
  afterAll(async () => {
    await api.close();
  });

  test('a waiting long-poll answers 200 with the full execution as soon as the execution completes (woken by NOTIFY)', async () => {
    const e = await createExecutionIn(api.client, api.db, 'running');
    const started = Date.now();
    const waiting = api.client.wait(e.id, { timeoutSeconds: 30 });
    await waitUntil(async () => (await longPollsWaiting(api)) >= 1, 'the long-poll to register');
    await completeAs(api.db, e.lease!, { total: 3 });
    const done = await waiting;
    expect(done).toMatchObject({ execution_id: e.id, status: 'completed', output: { total: 3 }, error: null });
    expect(Date.now() - started).toBeLessThan(10000);
  });

  test('many long-polls on one execution all answer when it ends', async () => {
    const e = await createExecutionIn(api.client, api.db, 'waiting');
    const waits = Array.from({ length: 25 }, () => api.client.wait(e.id, { timeoutSeconds: 30 }));
    await waitUntil(async () => (await longPollsWaiting(api)) >= 25, 'all long-polls to register');
    await api.client.cancel(e.id);
    const answers = await Promise.all(waits);
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set(['cancelled']));
  });

  test('a client that hangs up frees its waiter at once', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const abort = new AbortController();
    const hanging = fetch(`${api.api.url}/api/v1/executions/${e.id}/wait?timeout=60`, { signal: abort.signal }).catch(() => undefined);
    await waitUntil(async () => (await longPollsWaiting(api)) === 1, 'the long-poll to register');
    abort.abort();
    await hanging;
    await waitUntil(async () => (await longPollsWaiting(api)) === 0, 'the waiter to be released');
  });

  test('close() answers open long-polls with 202 instead of cutting them, and does not wait out idle keep-alive connections', async () => {
    const other = await startTestApi();
    try {
      const e = await createExecutionIn(other.client, other.db, 'pending');
      const answer = fetch(`${other.api.url}/api/v1/executions/${e.id}/wait?timeout=60`);
      await waitUntil(async () => (await longPollsWaiting(other)) === 1, 'the long-poll to register');
      // A keep-alive client holds its connection open; close() still returns promptly, not after the grace period.
      await other.call('GET', '/healthz');
      const closing = Date.now();
      await other.api.close();
      expect(Date.now() - closing).toBeLessThan(2000);
      const rec = await recordResponse('GET', `/api/v1/executions/${e.id}/wait`, await answer);
      expect(rec).toMatchSpec();
      expect(rec.status).toBe(202);
    } finally {
      await other.close();
    }
  });
});

describe('Node server timeouts', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi({ http: { requestTimeoutMs: 1000, headersTimeoutMs: 1000, keepAliveTimeoutMs: 1000 } });
  });
  afterAll(async () => {
    await api.close();
  });

  test('a long-poll that lasts longer than requestTimeoutMs still answers', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const started = Date.now();
    const res = await api.call('GET', `/api/v1/executions/${e.id}/wait?timeout=3`);
    expect(res.status).toBe(202);
    expect(Date.now() - started).toBeGreaterThanOrEqual(3000);
  });

  test('a client that never finishes its headers is still cut off', async () => {
    const socket = net.connect(api.api.port, '127.0.0.1');
    let received = '';
    socket.on('data', (d) => (received += d.toString()));
    socket.on('error', () => undefined);
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write('GET /healthz HTTP/1.1\r\nHost: test\r\n'); // and never the blank line
    const started = Date.now();
    await closed;
    expect(Date.now() - started).toBeLessThan(5000);
    expect(received).toMatch(/^HTTP\/1\.1 408|^$/);
  });
});

describe('ExecutionWaiters fan-out', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => {
    await t.drop();
  });

  test('one notification or one fallback tick costs one query for all waiters, never one per waiter', async () => {
    const listener = new EventEmitter();
    const waiters = new ExecutionWaiters({ db: t.db, listener, pollIntervalMs: 100, log: createLogger({ level: 'silent' }) });
    const rows = await insertExecutions(t.db, Array.from({ length: 50 }, (_, i) => ({ task: 'fan-out', data: { i } })));
    const ids = rows.map((r) => r.execution.id);
    let queries = 0;
    const count = () => queries++;
    t.db.on('query', count);
    try {
      waiters.start();
      const pending = ids.map((id) => waiters.waitForTerminal(id, 30000));
      expect(waiters.size).toBe(50);
      await waitUntil(() => queries >= 5, 'five fallback ticks', 5000, 10);
      // Each tick re-checks all 50 waiters in one statement.
      const ticks = queries;
      await new Promise((r) => setTimeout(r, 350));
      expect(queries - ticks).toBeLessThanOrEqual(5);
      waiters.stop();
      await Promise.all(pending.map((p) => p.done));

      // A notification naming all 50 ids costs one query.
      const notified = new ExecutionWaiters({ db: t.db, listener, pollIntervalMs: 600000, log: createLogger({ level: 'silent' }) });
      notified.start();
      const again = ids.map((id) => notified.waitForTerminal(id, 30000));
      await t.db.raw(`UPDATE stepwise.executions SET status = 'completed', completed_at = now() WHERE task = 'fan-out'`);
      queries = 0;
      listener.emit('notification', CHANNEL_CHANGED, ids.join(','));
      const results = await Promise.all(again.map((p) => p.done));
      expect(results.every((r) => r?.status === 'completed')).toBe(true);
      expect(queries).toBe(1);
      notified.stop();
    } finally {
      t.db.off('query', count);
    }
  });

  test('a completion whose notification was lost is found by the fallback re-check', async () => {
    const listener = new EventEmitter();
    const waiters = new ExecutionWaiters({ db: t.db, listener, pollIntervalMs: 100, log: createLogger({ level: 'silent' }) });
    waiters.start();
    const [{ execution }] = await insertExecutions(t.db, [{ task: 'lost', data: null }]);
    const wait = waiters.waitForTerminal(execution.id, 20000);
    // No NOTIFY: a plain UPDATE, as if the notification had been lost with the listen connection.
    await t.db.raw(`UPDATE stepwise.executions SET status = 'failed', completed_at = now() WHERE id = ?`, [execution.id]);
    expect((await wait.done)?.status).toBe('failed');
    waiters.stop();
  });

  test('a reconnect of the listener re-checks every waiter at once', async () => {
    const listener = new EventEmitter();
    const waiters = new ExecutionWaiters({ db: t.db, listener, pollIntervalMs: 600000, log: createLogger({ level: 'silent' }) });
    waiters.start();
    const [{ execution }] = await insertExecutions(t.db, [{ task: 'reconnect', data: null }]);
    const wait = waiters.waitForTerminal(execution.id, 20000);
    await t.db.raw(`UPDATE stepwise.executions SET status = 'cancelled', completed_at = now() WHERE id = ?`, [execution.id]);
    listener.emit('connected');
    expect((await wait.done)?.status).toBe('cancelled');
    waiters.stop();
  });
});
