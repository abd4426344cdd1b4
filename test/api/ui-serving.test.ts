import http from 'node:http';
import { startTestApi, type TestApi } from '../helpers/api-server';

const TOKEN = 'serving-test-token';
let t: TestApi;

beforeAll(async () => {
  t = await startTestApi({ tokens: [TOKEN], basePath: '/ops' });
});
afterAll(() => t.close());

async function get(path: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${t.api.url}${path}`, { headers });
}

/**
 * The status of a conditional GET as a browser revalidates (If-None-Match, no Cache-Control: no-cache).
 * Not fetch(): the Fetch standard adds `Cache-Control: no-cache` to conditional requests, which
 * rightly turns off 304s.
 */
function revalidate(path: string, etag: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(`${t.api.url}${path}`, { headers: { 'If-None-Match': etag } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on('error', reject);
  });
}

describe('dashboard and API reference serving', () => {
  it('serves the dashboard page without a token, with a strict CSP and hashed asset links under the base path', async () => {
    const res = await get('/ui');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(res.headers.get('content-security-policy')).not.toContain('unsafe');
    const html = await res.text();
    expect(html).toContain('data-base-path="/ops"');
    expect(html).toMatch(/src="\/ops\/ui\/assets\/app-[A-Z0-9]+\.js"/);
    expect(html).toMatch(/href="\/ops\/ui\/assets\/styles-[A-Z0-9]+\.css"/);
    expect((await get('/ui/')).status).toBe(200);
  });

  it('answers a matching If-None-Match with 304 and serves assets compressed and immutable', async () => {
    const page = await get('/ui');
    const etag = page.headers.get('etag') as string;
    expect(await revalidate('/ui', etag)).toBe(304);
    const script = /src="\/ops(\/ui\/assets\/[^"]+)"/.exec(await page.text())?.[1] as string;
    const br = await get(script, { 'Accept-Encoding': 'br' });
    expect(br.status).toBe(200);
    expect(br.headers.get('content-encoding')).toBe('br');
    expect(br.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(br.headers.get('vary')).toBe('Accept-Encoding');
    const body = await br.text(); // fetch decodes brotli
    expect(body).toContain('stepwise.token');
    // One small bundle: well under 40 KB on the wire.
    const gz = await get(script, { 'Accept-Encoding': 'gzip' });
    expect(gz.headers.get('content-encoding')).toBe('gzip');
    expect(Number(br.headers.get('content-length'))).toBeLessThan(40 * 1024);
    expect(await revalidate(script, br.headers.get('etag') as string)).toBe(304);
  });

  it('answers unknown assets with the 404 envelope and keeps the API behind the token', async () => {
    const missing = await get('/ui/assets/app-NOPE.js');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: 'route_not_found' } });
    expect((await get('/api/v1/executions')).status).toBe(401);
    expect((await get('/api/v1/executions', { Authorization: `Bearer ${TOKEN}` })).status).toBe(200);
  });

  it('serves the API reference offline, pointed at the spec under the base path', async () => {
    const res = await get('/docs');
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain('data-spec-url="/ops/api/v1/openapi.yaml"');
    const assets = [...html.matchAll(/(?:src|href)="\/ops(\/docs\/assets\/[^"]+)"/g)].map((m) => m[1]);
    expect(assets).toHaveLength(3);
    for (const asset of assets) {
      const r = await get(asset, { 'Accept-Encoding': 'gzip' });
      expect(r.status).toBe(200);
      expect(r.headers.get('cache-control')).toContain('immutable');
    }
    expect(html).not.toMatch(/https?:\/\//);
    expect((await get('/api/v1/openapi.yaml')).status).toBe(200);
  });
});
