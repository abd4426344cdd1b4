import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { ApiState } from './state';

/** A client-sent id is echoed only when it is short and plain, so it is safe in logs and headers. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Gives every request an id (the client's `X-Request-Id` when sane, else a new UUID) and echoes it on every response. */
export function assignRequestId(): Middleware<ApiState> {
  // Not async: nothing runs after next(), so a long-poll parked below holds no suspended frame here.
  return (ctx, next) => {
    const sent = ctx.get('X-Request-Id');
    ctx.state.requestId = SANE_REQUEST_ID.test(sent) ? sent : randomUUID();
    ctx.set('X-Request-Id', ctx.state.requestId);
    return next();
  };
}
