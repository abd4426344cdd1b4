// Hardening at the edge: with auth off, web pages cannot drive the server (cross-origin writes, DNS
// rebinding); /metrics can ask for a token; every answer carries nosniff and, unless it is a static
// asset, no-store.
import http from 'node:http';
import { Registry } from 'prom-client';
import '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { createExecutionIn } from '../helpers/simulated-worker';
import type { RecordedResponse } from '../helpers/spec-matcher';
import { isHostAllowed, isSameOrigin } from '../../src/api/browser-guard';
import { serveMetrics } from '../../src/worker-metrics';

const TOKEN = 'edge-api-token';
const METRICS_TOKEN = 'edge-metrics-token';
const EVIL = 'https://evil.example';

/**
 * A request with a Host header of our choosing (fetch always sends the URL's own), over node:http to
 * the server's real address; answered as a RecordedResponse, so it can be checked against the spec.
 */
function send(port: number, options: { method?: string; path: string; host: string; headers?: Record<string, string>; body?: string }): Promise<RecordedResponse> {
  const method = options.method ?? 'GET';
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: options.path, headers: { ...options.headers, Host: options.host } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        const headers = new Headers();
        for (const [name, value] of Object.entries(res.headers)) for (const v of [value ?? []].flat()) headers.append(name, v);
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ method, path: options.path, status: res.statusCode ?? 0, headers, text, body });
      });
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

const cancelPath = (id: string) => `/api/v1/executions/${id}/cancel`;

describe('with auth off (no API tokens)', () => {
  let api: TestApi;
  let port: number;
  let origin: string;
  beforeAll(async () => {
    api = await startTestApi();
    port = api.api.port;
    origin = new URL(api.api.url).origin;
  });
  afterAll(async () => {
    await api.close();
  });

  test('a cross-origin POST cancel is refused with 403 forbidden, and the execution stays pending', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    for (const foreign of [EVIL, 'null', 'http://127.0.0.1:1', `${origin}.evil.example`]) {
      const res = await api.call('POST', cancelPath(e.id), { headers: { Origin: foreign } });
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ error: { code: 'forbidden', message: `cross-origin request refused: origin ${JSON.stringify(foreign)} is not this server's` } });
    }
    // A schedule with a JSON body is no different: the refusal comes before anything is read.
    const schedule = await api.call('POST', '/api/v1/executions', { headers: { Origin: EVIL, 'Content-Type': 'application/json' }, body: `{"task":"${e.task}","data":{}}` });
    expect(schedule.status).toBe(403);
    expect((await api.client.get(e.id)).status).toBe('pending');
  });

  test("a same-origin POST cancel (the dashboard's) is served", async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const res = await api.call('POST', cancelPath(e.id), { headers: { Origin: origin } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ execution_id: e.id, status: 'cancelled' });
  });

  test('a POST without Origin (curl, SDKs) is served', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const res = await api.call('POST', cancelPath(e.id));
    expect(res.status).toBe(200);
    expect((await api.client.get(e.id)).status).toBe('cancelled');
  });

  test('a cross-origin GET is served: without CORS headers the page cannot read the answer', async () => {
    const res = await api.call('GET', '/api/v1/tasks', { headers: { Origin: EVIL } });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
  });

  test('a foreign Host is refused on GET and POST: the API, the dashboard, the docs, metrics and unknown paths', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const requests = [
      { method: 'GET', path: '/api/v1/tasks' },
      { method: 'GET', path: `/api/v1/executions/${e.id}` },
      { method: 'POST', path: cancelPath(e.id) },
      { method: 'GET', path: '/api/v1/openapi.yaml' },
      { method: 'GET', path: '/metrics' },
      { method: 'GET', path: '/ui' },
      { method: 'GET', path: '/docs' },
      { method: 'GET', path: '/nowhere' },
    ];
    for (const host of [`evil.example:${port}`, 'evil.example', 'localhost.evil.example', 'EVIL.example:80']) {
      for (const r of requests) {
        const res = await send(port, { ...r, host });
        expect([r.path, host, res.status]).toEqual([r.path, host, 403]);
        expect(res.body).toMatchObject({ error: { code: 'forbidden', message: `host ${JSON.stringify(host.toLowerCase().replace(/:\d+$/, ''))} is not allowed; set STEPWISE_ALLOWED_HOSTS` } });
        expect(res).toMatchSpec();
      }
    }
    expect((await api.client.get(e.id)).status).toBe('pending');
  });

  test('a DNS-rebound name is refused even though its Origin matches its Host', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const host = `rebind.evil.example:${port}`;
    const res = await send(port, { method: 'POST', path: cancelPath(e.id), host, headers: { Origin: `http://${host}` } });
    expect(res.status).toBe(403);
    expect((await api.client.get(e.id)).status).toBe('pending');
  });

  test('loopback names and IP addresses are allowed as Host', async () => {
    for (const host of [`localhost:${port}`, 'localhost', `127.0.0.1:${port}`, `[::1]:${port}`, `dev.localhost:${port}`, 'LOCALHOST', `10.1.2.3:${port}`, `[fd00::1]:${port}`]) {
      const res = await send(port, { path: '/api/v1/tasks', host });
      expect([host, res.status]).toEqual([host, 200]);
      expect(res).toMatchSpec();
    }
    // The dashboard works under such a name, and its same-origin writes too.
    expect((await send(port, { path: '/ui', host: `localhost:${port}` })).status).toBe(200);
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const cancel = await send(port, { method: 'POST', path: cancelPath(e.id), host: `localhost:${port}`, headers: { Origin: `http://localhost:${port}` } });
    expect(cancel.status).toBe(200);
  });

  test('liveness and readiness answer whatever the Host: orchestrators probe by any name', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const res = await send(port, { path, host: 'pod-10-0-0-7.cluster.internal' });
      expect([path, res.status]).toEqual([path, 200]);
      expect(res).toMatchSpec();
    }
  });
});

describe('with allowed hosts configured (STEPWISE_ALLOWED_HOSTS)', () => {
  let api: TestApi;
  let port: number;
  beforeAll(async () => {
    api = await startTestApi({ http: { allowedHosts: ['stepwise.internal', '*.corp.example'] } });
    port = api.api.port;
  });
  afterAll(async () => {
    await api.close();
  });

  test('a named host and the subdomains of a *.suffix are served; other names are still refused', async () => {
    for (const host of [`stepwise.internal:${port}`, 'Stepwise.Internal', 'a.corp.example', 'b.a.corp.example', 'localhost', '127.0.0.1']) {
      expect([host, (await send(port, { path: '/api/v1/tasks', host })).status]).toEqual([host, 200]);
    }
    for (const host of ['corp.example', 'evil.example', 'stepwise.internal.evil.example', 'xcorp.example']) {
      expect([host, (await send(port, { path: '/api/v1/tasks', host })).status]).toEqual([host, 403]);
    }
  });

  test('a same-origin POST through a named host is served, also as https behind a TLS-terminating proxy', async () => {
    for (const [host, pageOrigin] of [
      [`stepwise.internal:${port}`, `http://stepwise.internal:${port}`],
      ['stepwise.internal', 'https://stepwise.internal'],
      ['stepwise.internal:443', 'https://stepwise.internal'],
    ]) {
      const e = await createExecutionIn(api.client, api.db, 'pending');
      const res = await send(port, { method: 'POST', path: cancelPath(e.id), host, headers: { Origin: pageOrigin } });
      expect([host, pageOrigin, res.status]).toEqual([host, pageOrigin, 200]);
    }
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const other = await send(port, { method: 'POST', path: cancelPath(e.id), host: 'stepwise.internal', headers: { Origin: 'https://a.corp.example' } });
    expect(other.status).toBe(403);
  });
});

describe('with API tokens configured', () => {
  let api: TestApi;
  let port: number;
  beforeAll(async () => {
    api = await startTestApi({ tokens: [TOKEN], metricsToken: METRICS_TOKEN });
    port = api.api.port;
  });
  afterAll(async () => {
    await api.close();
  });

  test('a cross-origin request is decided by its token: served with a valid one, 401 without', async () => {
    const e = await createExecutionIn(api.client, api.db, 'pending');
    const without = await api.call('POST', cancelPath(e.id), { headers: { Origin: EVIL } });
    expect(without.status).toBe(401);
    expect(without.body).toMatchObject({ error: { code: 'unauthorized' } });
    const withToken = await api.call('POST', cancelPath(e.id), { headers: { Origin: EVIL, Authorization: `Bearer ${TOKEN}` } });
    expect(withToken.status).toBe(200);
    expect(withToken.body).toEqual({ execution_id: e.id, status: 'cancelled' });
  });

  test('Host is not checked when no allowed hosts are configured: the token protects what matters', async () => {
    const res = await send(port, { path: '/api/v1/tasks', host: 'stepwise.example.com', headers: { Authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    expect((await send(port, { path: '/api/v1/tasks', host: 'stepwise.example.com' })).status).toBe(401);
  });

  test('Host is checked when allowed hosts are configured, token or not', async () => {
    const listed = await startTestApi({ tokens: [TOKEN], http: { allowedHosts: ['stepwise.example.com'] }, db: { db: api.db, url: api.t.url } });
    try {
      const headers = { Authorization: `Bearer ${TOKEN}` };
      expect((await send(listed.api.port, { path: '/api/v1/tasks', host: 'stepwise.example.com', headers })).status).toBe(200);
      const refused = await send(listed.api.port, { path: '/api/v1/tasks', host: 'evil.example', headers });
      expect(refused.status).toBe(403);
      expect(refused).toMatchSpec();
    } finally {
      await listed.close();
    }
  });

  test('GET /metrics without a token, or with a wrong one, is 401 unauthorized with WWW-Authenticate', async () => {
    const attempts: Array<Record<string, string>> = [{}, { Authorization: `Bearer ${METRICS_TOKEN}x` }, { Authorization: `Basic ${Buffer.from(`m:${METRICS_TOKEN}`).toString('base64')}` }];
    for (const headers of attempts) {
      const res = await api.call('GET', '/metrics', { headers });
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ error: { code: 'unauthorized' } });
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect(res.text).not.toContain('stepwise_');
    }
  });

  test('GET /metrics with the metrics token, or with an API token, is 200', async () => {
    for (const token of [METRICS_TOKEN, TOKEN]) {
      const res = await api.call('GET', '/metrics', { headers: { Authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(res.text).toContain('stepwise_http_request_duration_seconds');
    }
    // The metrics token opens nothing else: a known token of another kind, so 403 rather than 401.
    const other = await api.call('GET', '/api/v1/tasks', { headers: { Authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(other.status).toBe(403);
    expect(other.body).toMatchObject({ error: { code: 'forbidden', reason: 'client_token_required' } });
  });
});

describe("a worker-only process's metrics server", () => {
  test('asks for the same token, and answers with the same headers', async () => {
    const registry = new Registry();
    const metrics = await serveMetrics(registry, { host: '127.0.0.1', port: 0, tokens: [METRICS_TOKEN, TOKEN] });
    try {
      const refused = await fetch(metrics.url);
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect(await refused.json()).toEqual({ error: { code: 'unauthorized', message: 'a valid bearer token is required' } });
      expect((await fetch(metrics.url, { headers: { Authorization: `Bearer ${METRICS_TOKEN}-wrong` } })).status).toBe(401);
      for (const token of [METRICS_TOKEN, TOKEN]) {
        const res = await fetch(metrics.url, { headers: { Authorization: `Bearer ${token}` } });
        expect(res.status).toBe(200);
        expect(res.headers.get('x-content-type-options')).toBe('nosniff');
        expect(res.headers.get('cache-control')).toBe('no-store');
      }
    } finally {
      await metrics.close();
    }
  });
});

describe('response headers', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi({ tokens: [TOKEN] });
  });
  afterAll(async () => {
    await api.close();
  });

  test('a 200, a 404, a 422 and a 401 carry Cache-Control: no-store and X-Content-Type-Options: nosniff', async () => {
    const auth = { Authorization: `Bearer ${TOKEN}` };
    const answers = [
      await api.call('GET', '/api/v1/tasks', { headers: auth }),
      await api.call('GET', '/api/v1/executions/0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10', { headers: auth }),
      await api.call('GET', '/api/v1/executions?limit=0', { headers: auth }),
      await api.call('GET', '/api/v1/tasks'),
      await api.call('GET', '/nowhere'),
      await api.call('GET', '/metrics'),
      await api.call('GET', '/healthz'),
    ];
    expect(answers.map((r) => r.status)).toEqual([200, 404, 422, 401, 404, 200, 200]);
    for (const res of answers) {
      expect([res.path, res.headers.get('cache-control')]).toEqual([res.path, 'no-store']);
      expect([res.path, res.headers.get('x-content-type-options')]).toEqual([res.path, 'nosniff']);
    }
  });

  test('dashboard and docs files carry nosniff and keep their own caching', async () => {
    const page = await fetch(`${api.api.url}/ui`);
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page.headers.get('cache-control')).toBe('no-cache');
    const script = /src="(\/ui\/assets\/[^"]+)"/.exec(await page.text())?.[1] as string;
    const asset = await fetch(`${api.api.url}${script}`);
    expect(asset.headers.get('x-content-type-options')).toBe('nosniff');
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    const missing = await fetch(`${api.api.url}/ui/assets/app-NOPE.js`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get('cache-control')).toBe('no-store');
    const docs = await fetch(`${api.api.url}/docs`);
    expect(docs.headers.get('x-content-type-options')).toBe('nosniff');
  });
});

describe('the checks themselves', () => {
  test('same origin: host and port as addressed, default ports elided, any case; never null or another scheme', () => {
    expect(isSameOrigin('http://localhost:8080', 'localhost:8080')).toBe(true);
    expect(isSameOrigin('http://LOCALHOST:8080', 'localhost:8080')).toBe(true);
    expect(isSameOrigin('http://example.com', 'example.com:80')).toBe(true);
    expect(isSameOrigin('https://example.com', 'example.com')).toBe(true);
    expect(isSameOrigin('http://[::1]:8080', '[::1]:8080')).toBe(true);
    expect(isSameOrigin('http://localhost:8081', 'localhost:8080')).toBe(false);
    expect(isSameOrigin('http://localhost', 'localhost:8080')).toBe(false);
    expect(isSameOrigin('https://example.com', 'example.com:80')).toBe(false);
    expect(isSameOrigin('null', 'localhost:8080')).toBe(false);
    expect(isSameOrigin('file://', 'localhost:8080')).toBe(false);
    expect(isSameOrigin('chrome-extension://abc', 'abc')).toBe(false);
    expect(isSameOrigin('http://localhost:8080', '')).toBe(false);
  });

  test('allowed hosts: IP addresses, localhost and *.localhost always; listed names exactly, *.suffix, or * for any', () => {
    for (const name of ['127.0.0.1', '::1', '192.168.1.20', 'localhost', 'a.localhost']) expect([name, isHostAllowed(name, [])]).toEqual([name, true]);
    for (const name of ['example.com', 'localhost.example.com', 'xlocalhost', '127.0.0.1.nip.io']) expect([name, isHostAllowed(name, [])]).toEqual([name, false]);
    expect(isHostAllowed('example.com', ['Example.com'])).toBe(true);
    expect(isHostAllowed('a.example.com', ['*.example.com'])).toBe(true);
    expect(isHostAllowed('example.com', ['*.example.com'])).toBe(false);
    expect(isHostAllowed('anything.at.all', ['*'])).toBe(true);
  });
});
