// GET / leads to the dashboard, under the base path too, and only for names the Host guard allows.
import http from 'node:http';
import { startTestApi, type TestApi } from '../helpers/api-server';

/** A request over node:http (fetch follows redirects and always sends the URL's own Host). */
function send(port: number, method: string, path: string, host?: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: host ? { Host: host } : {} }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('GET / without a base path', () => {
  let t: TestApi;
  beforeAll(async () => {
    t = await startTestApi();
  });
  afterAll(() => t.close());

  test('redirects to /ui/ with 302, and the page is there', async () => {
    for (const method of ['GET', 'HEAD']) {
      const res = await send(t.api.port, method, '/');
      expect([method, res.status, res.headers.location]).toEqual([method, 302, '/ui/']);
    }
    const followed = await fetch(`${t.api.url}/`);
    expect(followed.status).toBe(200);
    expect(followed.url).toBe(`${t.api.url}/ui/`);
    expect(await followed.text()).toContain('<div id="app">');
  });

  test('other methods on / get 405 with Allow', async () => {
    const res = await send(t.api.port, 'POST', '/');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'method_not_allowed' } });
  });

  test('goes through the Host guard: a foreign name gets 403, not a redirect', async () => {
    const res = await send(t.api.port, 'GET', '/', 'evil.example');
    expect(res.status).toBe(403);
    expect(res.headers.location).toBeUndefined();
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'forbidden' } });
    expect((await send(t.api.port, 'GET', '/', `localhost:${t.api.port}`)).status).toBe(302);
  });
});

describe('GET / under a base path', () => {
  let t: TestApi;
  beforeAll(async () => {
    t = await startTestApi({ basePath: '/ops' });
  });
  afterAll(() => t.close());

  test('{base} and {base}/ redirect to {base}/ui/; / outside the base path is not ours', async () => {
    for (const path of ['/ops', '/ops/']) {
      const res = await send(t.api.port, 'GET', path);
      expect([path, res.status, res.headers.location]).toEqual([path, 302, '/ops/ui/']);
    }
    expect((await send(t.api.port, 'GET', '/')).status).toBe(404);
    expect((await fetch(`${t.api.url}/`)).url).toBe(`${t.api.url}/ui/`);
  });
});
