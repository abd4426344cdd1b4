// Security (issue 5, item 4) beyond auth.test.ts: slow clients are cut off, ids are validated before any
// SQL runs, and an outage leaks neither stacks nor connection details into answers or logs.
import net from 'node:net';
import '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { createTcpProxy, type TcpProxy } from '../helpers/tcp-proxy';
import { createDb, type Db } from '../../src/store/db';

/** Opens a raw connection, runs `feed` on it and resolves with what the server sent and when it hung up. */
function rawExchange(port: number, feed: (socket: net.Socket) => void): Promise<{ text: string; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (d) => (text += d.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve({ text, closedAfterMs: Date.now() - started }));
    socket.on('connect', () => feed(socket));
    setTimeout(() => reject(new Error(`the server kept a slow client for 15 s; got ${JSON.stringify(text)}`)), 15000).unref();
  });
}

describe('slow clients', () => {
  let api: TestApi;
  let port: number;
  beforeAll(async () => {
    api = await startTestApi({ http: { headersTimeoutMs: 1000, requestTimeoutMs: 2000 } });
    port = api.api.port;
  });
  afterAll(async () => {
    await api.close();
  });

  test('a client that sends its headers very slowly (slowloris) is cut off after the header timeout', async () => {
    let timer: NodeJS.Timeout | undefined;
    const result = await rawExchange(port, (socket) => {
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      let i = 0;
      // One more header every 300 ms, never the blank line that ends them.
      timer = setInterval(() => socket.writable && socket.write(`X-Slow-${i++}: a\r\n`), 300);
    });
    clearInterval(timer);
    expect(result.closedAfterMs).toBeGreaterThanOrEqual(900);
    expect(result.closedAfterMs).toBeLessThan(6000);
    expect(result.text).toMatch(/^HTTP\/1\.1 408|^$/);
  });

  test('a client that never finishes its body is cut off after the request timeout', async () => {
    const result = await rawExchange(port, (socket) => {
      socket.write('POST /api/v1/executions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"task":');
    });
    expect(result.closedAfterMs).toBeGreaterThanOrEqual(1500);
    expect(result.closedAfterMs).toBeLessThan(7000);
    expect(result.text).not.toMatch(/HTTP\/1\.1 (2|5)\d\d/);
  });

  test('a slow client does not hold up others', async () => {
    const slow = rawExchange(port, (socket) => socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n'));
    expect((await api.call('GET', '/healthz')).status).toBe(200);
    await slow;
  });
});

describe('with the database unreachable', () => {
  let t: TestDatabase;
  let proxy: TcpProxy;
  let db: Db;
  let api: TestApi;
  beforeAll(async () => {
    t = await createTestDatabase();
    const target = new URL(t.url);
    proxy = await createTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    // Never started: every query fails, so an answer that is not 503 ran no SQL.
    db = createDb({ url: proxy.urlThrough(t.url), acquireTimeoutMs: 1000 });
    api = await startTestApi({ db: { db, url: proxy.urlThrough(t.url) }, logLevel: 'debug' });
  });
  afterAll(async () => {
    await api.close();
    await db.destroy();
    await proxy.stop();
    await t.drop();
  });

  const junkIds = ['not-a-uuid', "1' OR '1'='1", '00000000-0000-0000-0000-000000000000x', 'x'.repeat(300), '%E2%98%83', '9'.repeat(40)];

  test('ids are validated before any SQL runs: a junk id is 404 even with the database down', async () => {
    for (const id of junkIds) {
      const answers = [
        await api.call('GET', `/api/v1/executions/${id}`),
        await api.call('GET', `/api/v1/executions/${id}/steps`),
        await api.call('GET', `/api/v1/executions/${id}/wait?timeout=0`),
        await api.call('POST', `/api/v1/executions/${id}/cancel`),
        await api.call('POST', `/api/v1/events/${id}/approval`, { headers: { 'Content-Type': 'application/json' }, body: '{}' }),
      ];
      for (const res of answers) {
        expect(res.status).toBe(404);
        expect(res.body).toMatchObject({ error: { code: 'execution_not_found' } });
      }
    }
  });

  test('neither answers nor log lines carry a stack, SQL or the password; answers do not name the database', async () => {
    const res = await api.call('GET', '/api/v1/executions?limit=5');
    expect(res.status).toBe(503);
    const url = new URL(proxy.urlThrough(t.url));
    for (const text of [res.text, api.logs.text]) {
      expect(text).not.toMatch(/\n\s+at |"stack"|SELECT |stepwise\.executions/);
      // The connection string never appears; nor does its password, where it has one (the machine's
      // PostgreSQL uses trust auth, so its URL has none).
      expect(text).not.toContain('postgres://');
      if (url.password) expect(text).not.toContain(url.password);
    }
    // The log may name the unreachable address (operators need it); the client learns nothing of it.
    expect(res.text).not.toContain(`:${url.port}`);
    expect(res.text).not.toMatch(/ECONNREFUSED|127\.0\.0\.1/);
  });
});
