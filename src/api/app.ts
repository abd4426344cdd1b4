import Koa from 'koa';
import Router from '@koa/router';
import { MethodNotAllowedError, RouteNotFoundError } from '../errors';
import { countRefusals } from '../metrics';
import { logRequests } from './access-log';
import { observeRequests } from './request-observers';
import { refuseCrossSiteRequests } from './browser-guard';
import type { ApiDeps } from './deps';
import { handleErrors } from './error-middleware';
import { serializeJsonBodies } from './json-body';
import { addEventRoutes } from './events';
import { addExecutionRoutes } from './executions';
import { addStreamRoutes } from './streams';
import { addOperateRoutes } from './operate';
import { addOperationalRoutes } from './health';
import { addMetricsRoute, measureRequests } from './metrics';
import { assignRequestId } from './request-id';
import { setResponseHeaders } from './response-headers';
import type { ApiState } from './state';
import { addStatsRoutes } from './stats';
import { addTaskRoutes } from './tasks';
import { addWaitRoute } from './wait';
import { addWorkerRoutes } from './workers';
import { addWorkerProtocolRoutes } from './worker-protocol/routes';
import { addWebhookRoutes } from './webhooks';
import { serveApiReference } from './docs';
import { serveGuides } from './guides';
import { serveDashboard } from './ui';

/** Answers what no route took: 405 with Allow when the path exists under another method, else 404. */
function rejectUnrouted(router: Router<ApiState>): Koa.Middleware<ApiState> {
  return async (ctx) => {
    const matched = router.match(ctx.path, ctx.method);
    const allowed = [...new Set(matched.path.flatMap((layer) => layer.methods))];
    if (allowed.length > 0) throw new MethodNotAllowedError(ctx.method, allowed);
    throw new RouteNotFoundError(ctx.method, ctx.path);
  };
}

/**
 * `{base}/` and `{base}` lead to the dashboard: a 302 (not a permanent redirect, which browsers would
 * keep even if the root later serves something else). Other methods there get 405.
 */
function redirectRootToDashboard(base: string): Koa.Middleware<ApiState> {
  const roots = new Set([base || '/', `${base}/`]);
  // Not async: every request passes here, and a long-poll parked below should hold no frame of it.
  return (ctx, next) => {
    if (!roots.has(ctx.path)) return next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') throw new MethodNotAllowedError(ctx.method, ['GET', 'HEAD']);
    ctx.redirect(`${base}/ui/`);
  };
}

/**
 * The Koa application: request id, timing and logging, common headers, the error envelope, the
 * cross-site guard, then `/` (a redirect to the dashboard), the routes of openapi.yaml (each behind its
 * own auth, body parsing and validation), the dashboard, the API reference and the guides, then 404/405.
 */
export function createApiApp(deps: ApiDeps): Koa<ApiState> {
  const app = new Koa<ApiState>();
  // Errors never reach Koa's default handler (it would print stacks to stderr): handleErrors answers them.
  app.silent = true;
  const base = deps.config.basePath;
  // Paths match exactly as the contract writes them: no case folding, no optional trailing slash.
  const router = new Router<ApiState>({ prefix: base || undefined, sensitive: true, strict: true });
  // First: GET /executions/changes must not be taken for GET /executions/{id} with the id "changes".
  addStreamRoutes(router, deps);
  addExecutionRoutes(router, deps);
  addOperateRoutes(router, deps);
  addWaitRoute(router, deps);
  addEventRoutes(router, deps);
  addTaskRoutes(router, deps);
  addWorkerRoutes(router, deps);
  addStatsRoutes(router, deps);
  // A step result or output may be as large as the value limit allows, beside the rest of its batch.
  const workerBodyLimit = Math.max(deps.routes.bodyLimitBytes, 2 * deps.config.limits.valueBytes + 1024 * 1024);
  addWorkerProtocolRoutes(router, deps, { ...deps.routes, bodyLimitBytes: workerBodyLimit }, deps.workerProtocol);
  addWebhookRoutes(router, deps);
  addOperationalRoutes(router, deps);
  addMetricsRoute(router, deps);

  app.use(assignRequestId());
  // Metrics and the access log see the final status: the error middleware runs inside them.
  app.use(observeRequests([measureRequests(deps.registry), logRequests(deps.log)]));
  app.use(setResponseHeaders());
  app.use(handleErrors(deps.log, countRefusals(deps.registry)));
  // Inside the error middleware: a body that cannot be written as JSON answers the envelope.
  app.use(serializeJsonBodies());
  // Before any route, so a refused request is never authenticated, parsed or answered otherwise.
  app.use(refuseCrossSiteRequests(deps.config));
  app.use(redirectRootToDashboard(base));
  app.use(router.routes());
  // Dashboard and API reference: public pages and assets; the API calls they make need the token.
  app.use(serveDashboard({ basePath: base }));
  app.use(serveApiReference({ basePath: base }));
  app.use(serveGuides({ basePath: base }));
  app.use(rejectUnrouted(router));
  return app;
}
