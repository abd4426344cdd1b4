import type { Middleware } from 'koa';
import type { ApiState } from './state';

/**
 * Headers every answer carries. `X-Content-Type-Options: nosniff` keeps a browser from running an
 * answer as something other than its declared type (a JSON error echoing input is never a script).
 * `Cache-Control: no-store`: an answer about executions is stale at once and may hold data no shared
 * cache should keep; static assets replace it with their own caching. Set before the handler runs,
 * so an answer that streams still has them, and again on an error, whose envelope must not inherit
 * the caching of an asset that failed half-way.
 */
export function setResponseHeaders(): Middleware<ApiState> {
  return async (ctx, next) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Cache-Control', 'no-store');
    await next();
    if (ctx.status >= 400 && !ctx.headerSent) ctx.set('Cache-Control', 'no-store');
  };
}
