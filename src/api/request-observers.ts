import type { Middleware } from 'koa';
import type { ApiContext, ApiState } from './state';

/** Told of every request once its status is final (after the error middleware): metrics, the access log. */
export type RequestObserver = (ctx: ApiContext, durationMs: number) => void;

/**
 * Times every request and tells each observer when it ends, whether it answered or failed. One
 * callback on the chain's promise for all observers rather than an async middleware each: an
 * awaiting middleware keeps a suspended frame (registers, promises, closures) for as long as the
 * request lasts, and a server holds 10,000 long-polls at once.
 */
export function observeRequests(observers: readonly RequestObserver[]): Middleware<ApiState> {
  return (ctx, next) => {
    const started = performance.now();
    const ended = () => {
      const durationMs = performance.now() - started;
      for (const observe of observers) observe(ctx, durationMs);
    };
    return next().then(ended, (err: unknown) => {
      ended();
      throw err;
    });
  };
}

/** The route template a request matched (never the raw path, which holds ids), or `unmatched`. */
export function matchedRoute(ctx: ApiContext): string {
  const route = (ctx as unknown as { _matchedRoute?: string })._matchedRoute;
  return typeof route === 'string' ? route : 'unmatched';
}
