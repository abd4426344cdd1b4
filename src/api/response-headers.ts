import type { Middleware } from 'koa';
import type { ApiState } from './state';

/**
 * Headers every answer carries. `X-Content-Type-Options: nosniff` keeps a browser from running an
 * answer as something other than its declared type (a JSON error echoing input is never a script).
 * `Cache-Control: no-store`: an answer about executions is stale at once and may hold data no shared
 * cache should keep; static assets replace it with their own caching. Set before the handler runs,
 * so an answer that streams still has them. (An error's envelope sets `no-store` again, in the error
 * middleware, so it never inherits the caching of an asset that failed half-way.) Not async: nothing
 * runs after next(), so a parked long-poll holds no suspended frame here.
 */
export function setResponseHeaders(): Middleware<ApiState> {
  return (ctx, next) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Cache-Control', 'no-store');
    return next();
  };
}
