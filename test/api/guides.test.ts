// Where a user looks for help on a running server: the dashboard's header and the API reference link
// to the guides, which the server serves from the package's docs/ (an index, then each guide as text),
// under the base path and without a token, as the dashboard and the API reference are.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { startTestApi, type TestApi } from '../helpers/api-server';

const DOCS = path.join(__dirname, '..', '..', 'docs');
const TOKEN = 'guides-test-token';
let t: TestApi;

beforeAll(async () => {
  t = await startTestApi({ tokens: [TOKEN], basePath: '/ops' });
});
afterAll(() => t.close());

/** A path under the base path (`t.api.url` ends with it), or an absolute one from the server's root. */
const get = (p: string) => fetch(`${t.api.url}${p}`, { redirect: 'manual' });
const getFromRoot = (p: string) => fetch(new URL(p, t.api.url), { redirect: 'manual' });

describe('the guides on a running server', () => {
  test('the dashboard and the API reference link to the guides and to the API reference', async () => {
    const page = await (await get('/ui/')).text();
    const script = /src="([^"]*app-[^"]+\.js)"/.exec(page)?.[1] as string;
    const bundle = await (await getFromRoot(script)).text();
    expect(bundle).toContain('/docs/guides/');
    expect(bundle).toContain('API reference');
    expect(await (await get('/docs')).text()).toContain('<a href="/ops/docs/guides/">Guides</a>');
  });

  test('the index lists every guide in docs/ by its title, with no token', async () => {
    const res = await get('/docs/guides/');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    const html = await res.text();
    const files = readdirSync(DOCS).filter((f) => f.endsWith('.md'));
    expect(files).toEqual(expect.arrayContaining(['api.md', 'writing-tasks.md', 'operating.md', 'configuration.md']));
    for (const file of files) expect(html).toContain(`<a href="${file}">`);
    expect(html).toContain('<a href="writing-tasks.md">Writing tasks</a>');
    expect(html).toContain('<a href="/ops/docs">API reference</a>');
    expect((await get('/docs/guides')).headers.get('location')).toBe('/ops/docs/guides/');
  });

  test('each guide is served as its Markdown text; other names are 404', async () => {
    const res = await get('/docs/guides/api.md');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await res.text()).toBe(readFileSync(path.join(DOCS, 'api.md'), 'utf8'));
    for (const name of ['nope.md', '..%2Fpackage.json', '%2E%2E%2FREADME.md', 'images', 'api.md.bak']) {
      const missing = await get(`/docs/guides/${name}`);
      expect([name, missing.status]).toEqual([name, 404]);
      expect(await missing.json()).toMatchObject({ error: { code: 'route_not_found' } });
    }
    expect((await getFromRoot('/docs/guides/api.md')).status).toBe(404);
  });
});
