import type { ServerResponse } from 'node:http';
import type { Logger } from '../logger';
import { toErrorAnswer } from './error-middleware';
import { matchedRoute } from './request-observers';
import type { ApiContext, RequestReport } from './state';

/** What a handler returns once it has detached its response: addOperation then writes nothing. */
export const DETACHED = Symbol('answered outside Koa');
export type Detached = typeof DETACHED;

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * A response answered outside Koa, for a request that waits long (a parked long-poll): once the
 * handler detaches, Koa's chain ends at once, and the Koa context, its request and response
 * wrappers, the router's state and every closure over them become garbage. What stays is Node's
 * response, with the headers the middleware already set on it (request id, nosniff, no-store), and
 * the few values needed to write the answer and report it to the observers.
 *
 * The answer is the one Koa would have written: the same status, JSON body, content type and length,
 * the error envelope for a failure, and nothing on a response whose client hung up.
 */
export class DetachedResponse {
  constructor(
    readonly res: ServerResponse,
    private readonly requestId: string,
    private readonly method: string,
    private readonly route: string,
    private readonly observation: RequestReport | undefined,
  ) {}

  /** True once the client hung up: nobody will read an answer. */
  get hungUp(): boolean {
    return this.res.destroyed || this.res.socket?.destroyed === true;
  }

  /** Writes `body` as JSON with `status`, as Koa does for an object body, and reports the request. */
  json(status: number, body: unknown, headers?: Readonly<Record<string, string>>): void {
    this.jsonText(status, this.writable() && !this.res.headersSent ? JSON.stringify(body) : '', headers);
  }

  /** As json(), with the body already serialized (one text shared by many answers). */
  jsonText(status: number, text: string | Buffer, headers?: Readonly<Record<string, string>>): void {
    const { res } = this;
    if (this.writable() && !res.headersSent) {
      // In Koa's order: the type when the body is set, the error's headers, the length when it is sent.
      res.statusCode = status;
      res.setHeader('Content-Type', JSON_TYPE);
      for (const name in headers) res.setHeader(name, headers[name]);
      res.setHeader('Content-Length', Buffer.byteLength(text));
      // A HEAD response's body is dropped by Node, as Koa drops it: headers only, the length included.
      res.end(text);
    } else if (!res.writableEnded) res.end();
    this.observation?.ended({ requestId: this.requestId, method: this.method, route: this.route, status });
  }

  /** Answers `err` with the error envelope, as the error middleware would. Never throws: it is the last resort. */
  fail(err: unknown, log: Logger): void {
    try {
      const answer = toErrorAnswer(log, this.requestId, err);
      this.json(answer.status, answer.body, { ...answer.headers, 'Cache-Control': 'no-store' });
    } catch (failure) {
      log.error({ requestId: this.requestId, err: (failure as Error)?.message }, 'detached response failed');
      this.res.destroy();
    }
  }

  /** As Koa's `ctx.writable`: not ended, and the socket (if any) still writable. */
  private writable(): boolean {
    if (this.res.writableEnded) return false;
    const { socket } = this.res;
    return !socket || socket.writable;
  }
}

/**
 * Takes the response out of Koa: Koa leaves it alone (`ctx.respond = false`), the observers wait for
 * the detached answer, and Koa's own hold on the context goes too. Koa registers an on-finished
 * listener per request whose callback closes over the context (`ctx.onerror`); on-finished treats a
 * response's 'end' event as its finish, so emitting it runs that listener now (a no-op without an
 * error) and removes its listeners from the response and the socket. Nothing else listens for 'end'
 * on a server response.
 */
export function detachResponse(ctx: ApiContext): DetachedResponse {
  ctx.respond = false;
  const observation = ctx.state.observation;
  observation?.detach();
  const { res } = ctx;
  res.emit('end');
  // Koa's parse of the URL (parseurl's cache on Node's request), read no more. Cleared, not deleted:
  // a delete would turn the request into a slower and larger dictionary-mode object.
  (ctx.req as { _parsedUrl?: unknown })._parsedUrl = undefined;
  return new DetachedResponse(res, ctx.state.requestId, ctx.method, matchedRoute(ctx), observation);
}
