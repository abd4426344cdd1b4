import path from 'node:path';
import Router, { type RouterMiddleware } from '@koa/router';
import * as esbuild from 'esbuild';
import type { ApiState } from './state';
import { createStaticAsset, sendStaticAsset, type StaticAsset } from './static-assets';

/** The dashboard's browser source: two levels up from both src/api and dist/api, as openapi.yaml is. */
export const UI_SOURCE_DIR = path.resolve(__dirname, '..', '..', 'src', 'ui');

/** Hashed file names never change content: browsers may keep them for a year without asking again. */
const IMMUTABLE = 'public, max-age=31536000, immutable';

/**
 * The page runs only its own files: no inline script, no eval (the JSON Schema validator in the bundle
 * needs none), no third-party origin, and it talks to this server only.
 */
const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export interface DashboardBundle {
  /** By file name (`app-3F2K7Q.js`): the script and the stylesheet. */
  files: ReadonlyMap<string, StaticAsset>;
  script: string;
  stylesheet: string;
}

let building: Promise<DashboardBundle> | undefined;

/**
 * Bundles src/ui (TypeScript + Preact + the typed client) with esbuild, in memory, once per process:
 * about a second on first use, and `make run` needs no separate front-end build.
 */
export function buildDashboard(): Promise<DashboardBundle> {
  building ??= (async () => {
    const result = await esbuild.build({
      entryPoints: { app: path.join(UI_SOURCE_DIR, 'main.tsx'), styles: path.join(UI_SOURCE_DIR, 'styles.css') },
      bundle: true,
      minify: true,
      write: false,
      outdir: '/ui-assets',
      entryNames: '[name]-[hash]',
      format: 'esm',
      platform: 'browser',
      target: ['chrome109', 'firefox115', 'safari16'],
      jsx: 'automatic',
      jsxImportSource: 'preact',
      legalComments: 'none',
      define: { 'process.env.NODE_ENV': '"production"' },
      logLevel: 'silent',
    });
    const files = new Map<string, StaticAsset>();
    let script = '';
    let stylesheet = '';
    for (const out of result.outputFiles) {
      const name = path.basename(out.path);
      const isScript = name.endsWith('.js');
      files.set(name, createStaticAsset(Buffer.from(out.contents), isScript ? 'application/javascript; charset=utf-8' : 'text/css; charset=utf-8', IMMUTABLE));
      if (isScript) script = name;
      else stylesheet = name;
    }
    return { files, script, stylesheet };
  })();
  // A failed build (a syntax error while developing) must not stay cached: the next request retries.
  building.catch(() => {
    building = undefined;
  });
  return building;
}

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function renderIndex(basePath: string, bundle: DashboardBundle): string {
  const base = escapeHtml(basePath);
  return `<!doctype html>
<html lang="en" data-base-path="${base}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Stepwise</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${base}/ui/assets/${bundle.stylesheet}">
<script type="module" src="${base}/ui/assets/${bundle.script}"></script>
</head>
<body>
<div id="app"><noscript>The Stepwise dashboard needs JavaScript.</noscript></div>
</body>
</html>
`;
}

/**
 * `{basePath}/ui`: the operator dashboard, a page plus one script and one stylesheet with hashed
 * names. None of it needs a token (the page asks for one when the API answers 401), and every API
 * call it makes goes through the authenticated `/api/v1` routes.
 */
export function serveDashboard(options: { basePath: string }): ReturnType<Router<ApiState>['routes']> {
  const router = new Router<ApiState>({ prefix: options.basePath || undefined, strict: false });
  let index: { bundle: DashboardBundle; asset: StaticAsset } | undefined;
  const page: RouterMiddleware<ApiState> = async (ctx) => {
    const bundle = await buildDashboard();
    if (index?.bundle !== bundle) {
      index = {
        bundle,
        asset: createStaticAsset(renderIndex(options.basePath, bundle), 'text/html; charset=utf-8', 'no-cache', {
          'Content-Security-Policy': DASHBOARD_CSP,
          'Referrer-Policy': 'no-referrer',
          'X-Frame-Options': 'DENY',
        }),
      };
    }
    await sendStaticAsset(ctx, index.asset);
  };
  router.get('/ui', page);
  router.get('/ui/', page);
  router.get('/ui/assets/:file', async (ctx, next) => {
    const asset = (await buildDashboard()).files.get(ctx.params.file);
    if (!asset) return next();
    await sendStaticAsset(ctx, asset);
  });
  return router.routes();
}
