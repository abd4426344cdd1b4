import type { Middleware } from 'koa';
import type { Logger } from '../logger';
import type { ApiState } from './state';

/**
 * One log line per request: method, route template, status and duration under the request id.
 * Never headers, query strings or bodies, so tokens and payloads stay out of the log. The line is
 * built only when it will be written (a 5xx, or debug level on): at the default level most requests
 * log nothing, and the schedule path should not pay for a line nobody reads.
 */
export function logRequests(log: Logger): Middleware<ApiState> {
  return async (ctx, next) => {
    const started = performance.now();
    try {
      await next();
    } finally {
      const failed = ctx.status >= 500;
      if (failed || log.isLevelEnabled('debug')) {
        const route = (ctx as unknown as { _matchedRoute?: string })._matchedRoute;
        const fields = {
          requestId: ctx.state.requestId,
          method: ctx.method,
          route: typeof route === 'string' ? route : 'unmatched',
          status: ctx.status,
          durationMs: Math.round(performance.now() - started),
        };
        if (failed) log.warn(fields, 'request completed');
        else log.debug(fields, 'request completed');
      }
    }
  };
}
