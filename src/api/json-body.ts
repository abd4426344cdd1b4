import type { Middleware } from 'koa';
import type { ApiState } from './state';

/** A body Koa would write with JSON.stringify: a plain object or an array (not a buffer, stream or blob). */
function isJsonBody(body: unknown): body is object {
  if (typeof body !== 'object' || body === null) return false;
  if (Array.isArray(body)) return true;
  const proto = Object.getPrototypeOf(body) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * Turns an object body into its JSON text inside the middleware chain, where Koa would only do it in
 * its response step, after every middleware has returned: a body JSON cannot write (a string past the
 * engine's length limit, a cycle) then failed outside the error middleware, and Koa answered a
 * plain-text 500 while the access log and the metrics had recorded the handler's status. A throw
 * here reaches handleErrors, which mounts this inside itself, and answers the envelope.
 */
export function serializeJsonBodies(): Middleware<ApiState> {
  // Not async: a request in flight (a long-poll) should hold no suspended frame here.
  return (ctx, next) =>
    next().then(() => {
      const body = ctx.body;
      if (!isJsonBody(body)) return;
      // The type was set with the object body; a string body keeps it.
      ctx.body = JSON.stringify(body);
    });
}
