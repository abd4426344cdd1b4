import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import Router from '@koa/router';
import type { ApiState } from './state';
import { createStaticAsset, sendStaticAsset, type StaticAsset } from './static-assets';

/** The guides, docs/*.md at the package root: two levels up from both src/api and dist/api, as openapi.yaml is. */
export const GUIDES_DIR = path.resolve(__dirname, '..', '..', 'docs');

/** Only plain guide names: no path, so nothing outside docs/ can be named. */
const GUIDE_NAME = /^[a-z0-9][a-z0-9-]*\.md$/;

const GUIDES_CSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The guide's title: its first `# ` heading, else its file name. */
function readTitle(text: string, file: string): string {
  return /^# (.+)$/m.exec(text)?.[1].trim() ?? file;
}

async function listGuides(): Promise<{ file: string; title: string }[]> {
  const files = (await readdir(GUIDES_DIR).catch(() => [] as string[])).filter((f) => GUIDE_NAME.test(f)).sort();
  return Promise.all(files.map(async (file) => ({ file, title: readTitle(await readFile(path.join(GUIDES_DIR, file), 'utf8'), file) })));
}

function renderIndex(basePath: string, guides: { file: string; title: string }[]): string {
  const base = escapeHtml(basePath);
  const items = guides.map((g) => `<li><a href="${escapeHtml(g.file)}">${escapeHtml(g.title)}</a> <code>docs/${escapeHtml(g.file)}</code></li>`).join('\n');
  const body = guides.length > 0 ? `<ul>\n${items}\n</ul>` : '<p>This installation has no guides: they are the <code>docs/</code> folder of the stepwise package.</p>';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Stepwise guides</title>
<link rel="icon" href="data:,">
</head>
<body>
<p><a href="${base}/ui">← Stepwise dashboard</a> · <a href="${base}/docs">API reference</a></p>
<h1>Stepwise guides</h1>
<p>The guides as this installation ships them, in Markdown. Links between them work here; the README's
walk-through is in the package's README.md.</p>
${body}
</body>
</html>
`;
}

/**
 * `{basePath}/docs/guides/`: the guides the package ships (docs/*.md), an index page and each file as
 * Markdown text, so a server running without the repository still answers where to read on. Files
 * are read once, on first request.
 */
export function serveGuides(options: { basePath: string }): ReturnType<Router<ApiState>['routes']> {
  const router = new Router<ApiState>({ prefix: options.basePath || undefined, strict: true });
  const headers = { 'Content-Security-Policy': GUIDES_CSP, 'Referrer-Policy': 'no-referrer' };
  let index: Promise<StaticAsset> | undefined;
  const guides = new Map<string, Promise<StaticAsset | undefined>>();
  const readGuide = (file: string) => {
    let asset = guides.get(file);
    if (!asset) {
      asset = readFile(path.join(GUIDES_DIR, file)).then(
        (body) => createStaticAsset(body, 'text/plain; charset=utf-8', 'no-cache', headers),
        () => undefined,
      );
      guides.set(file, asset);
    }
    return asset;
  };
  router.get('/docs/guides', (ctx) => ctx.redirect(`${options.basePath}/docs/guides/`));
  router.get('/docs/guides/', async (ctx) => {
    index ??= listGuides().then((list) => createStaticAsset(renderIndex(options.basePath, list), 'text/html; charset=utf-8', 'no-cache', headers));
    await sendStaticAsset(ctx, await index);
  });
  router.get('/docs/guides/:file', async (ctx, next) => {
    const asset = GUIDE_NAME.test(ctx.params.file) ? await readGuide(ctx.params.file) : undefined;
    if (!asset) return next();
    await sendStaticAsset(ctx, asset);
  });
  return router.routes();
}
