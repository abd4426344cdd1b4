import { readFile } from 'node:fs/promises';
import path from 'node:path';
import Router from '@koa/router';
import type { ApiState } from './state';
import { createStaticAsset, sendStaticAsset, type StaticAsset } from './static-assets';

const SWAGGER_DIR = path.dirname(require.resolve('swagger-ui-dist/package.json'));
const SWAGGER_VERSION = (require('swagger-ui-dist/package.json') as { version: string }).version;
const SWAGGER_FILES: Record<string, string> = {
  'swagger-ui-bundle.js': 'application/javascript; charset=utf-8',
  'swagger-ui.css': 'text/css; charset=utf-8',
};

/** Swagger UI sets inline styles, hence 'unsafe-inline' for styles only; scripts stay same-origin. */
const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * Starts Swagger UI on the spec this server publishes. `validatorUrl: null` keeps it from calling
 * the public validator (the page must work offline), and the spec's `servers` (a localhost template)
 * is replaced by this page's own origin so "Try it out" talks to the server the reader is on.
 */
const INIT_SCRIPT = `(function () {
  var root = document.documentElement;
  var base = root.getAttribute('data-base-path') || '';
  var ui = SwaggerUIBundle({
    url: root.getAttribute('data-spec-url'),
    dom_id: '#swagger-ui',
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
    onComplete: function () {
      var spec = ui.specSelectors.specJson().toJS();
      spec.servers = [{ url: location.origin + base, description: 'This server' }];
      ui.specActions.updateJsonSpec(spec);
    }
  });
  window.ui = ui;
})();
`;

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function renderPage(basePath: string, init: StaticAsset): string {
  const base = escapeHtml(basePath);
  const assets = `${base}/docs/assets/${SWAGGER_VERSION}`;
  return `<!doctype html>
<html lang="en" data-base-path="${base}" data-spec-url="${base}/api/v1/openapi.yaml">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Stepwise API reference</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${assets}/swagger-ui.css">
</head>
<body>
<p style="margin:8px 20px;font:14px system-ui,sans-serif"><a href="${base}/ui">← Stepwise dashboard</a> · <a href="${base}/api/v1/openapi.yaml">openapi.yaml</a> · <a href="${base}/docs/guides/">Guides</a></p>
<div id="swagger-ui"></div>
<script src="${assets}/swagger-ui-bundle.js"></script>
<script src="${base}/docs/assets/init-${init.hash}.js"></script>
</body>
</html>
`;
}

/**
 * `{basePath}/docs`: the API reference, Swagger UI rendering `{basePath}/api/v1/openapi.yaml`, with
 * every asset served from node_modules/swagger-ui-dist (no CDN). Asset URLs carry the Swagger UI
 * version or a content hash, so browsers cache them for good.
 */
export function serveApiReference(options: { basePath: string }): ReturnType<Router<ApiState>['routes']> {
  const router = new Router<ApiState>({ prefix: options.basePath || undefined, strict: false });
  const immutable = 'public, max-age=31536000, immutable';
  const init = createStaticAsset(INIT_SCRIPT, 'application/javascript; charset=utf-8', immutable);
  const page = createStaticAsset(renderPage(options.basePath, init), 'text/html; charset=utf-8', 'no-cache', {
    'Content-Security-Policy': DOCS_CSP,
    'Referrer-Policy': 'no-referrer',
  });
  const vendor = new Map<string, Promise<StaticAsset>>();
  const vendorAsset = (file: string) => {
    let asset = vendor.get(file);
    if (!asset) {
      asset = readFile(path.join(SWAGGER_DIR, file)).then((body) => createStaticAsset(body, SWAGGER_FILES[file], immutable));
      asset.catch(() => vendor.delete(file));
      vendor.set(file, asset);
    }
    return asset;
  };
  router.get('/docs', (ctx) => sendStaticAsset(ctx, page));
  router.get('/docs/', (ctx) => sendStaticAsset(ctx, page));
  router.get(`/docs/assets/init-${init.hash}.js`, (ctx) => sendStaticAsset(ctx, init));
  router.get('/docs/assets/:version/:file', async (ctx, next) => {
    if (ctx.params.version !== SWAGGER_VERSION || !(ctx.params.file in SWAGGER_FILES)) return next();
    await sendStaticAsset(ctx, await vendorAsset(ctx.params.file));
  });
  return router.routes();
}
