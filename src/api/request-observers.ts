import type { Middleware } from 'koa';
import type { ApiContext, ApiState, ObservedRequest, RequestReport } from './state';

export type { ObservedRequest } from './state';

/** Told of every request once its status is final (after the error middleware): metrics, the access log. */
export type RequestObserver = (request: ObservedRequest, durationMs: number) => void;

/**
 * One request's timing and its observers. Koa's chain reports it when it ends, unless the handler
 * detached the response (detached-responses.ts): that answer is written later, outside Koa, and
 * reports it then with its real status and duration.
 */
export class RequestObservation implements RequestReport {
  private readonly started = performance.now();
  private detached = false;

  constructor(private readonly observers: readonly RequestObserver[]) {}

  detach(): void {
    this.detached = true;
  }

  /** The chain ended: reports the request unless it was detached. */
  chainEnded(ctx: ApiContext): void {
    if (!this.detached) this.ended({ requestId: ctx.state.requestId, method: ctx.method, route: matchedRoute(ctx), status: ctx.status });
  }

  ended(request: ObservedRequest): void {
    const durationMs = performance.now() - this.started;
    for (const observe of this.observers) observe(request, durationMs);
  }
}

/**
 * Times every request and tells each observer when it ends, whether it answered or failed. One
 * callback on the chain's promise for all observers rather than an async middleware each: an
 * awaiting middleware keeps a suspended frame (registers, promises, closures) for as long as the
 * request lasts.
 */
export function observeRequests(observers: readonly RequestObserver[]): Middleware<ApiState> {
  return (ctx, next) => {
    const observation = new RequestObservation(observers);
    ctx.state.observation = observation;
    return next().then(
      () => observation.chainEnded(ctx),
      (err: unknown) => {
        observation.chainEnded(ctx);
        throw err;
      },
    );
  };
}

/** The route template a request matched (never the raw path, which holds ids), or `unmatched`. */
export function matchedRoute(ctx: ApiContext): string {
  const route = (ctx as unknown as { _matchedRoute?: string })._matchedRoute;
  return typeof route === 'string' ? route : 'unmatched';
}
