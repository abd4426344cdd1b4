import type { Middleware } from 'koa';
import { AppError, ServerBusyError, ServiceUnavailableError, describeError, type ErrorCode } from '../errors';
import { isDatabaseUnavailable, isPoolSaturated } from '../store/db-errors';
import type { Logger } from '../logger';
import type { RefusalReason } from '../metrics';
import type { components } from '../../generated/openapi';
import type { ApiContext, ApiState } from './state';

type ErrorEnvelope = components['schemas']['ErrorEnvelope'];
type SpecErrorCode = components['schemas']['ErrorCode'];

// Compile-time proof that src/errors.ts and openapi.yaml's ErrorCode enum list the same codes.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const codesMatch: Same<ErrorCode, SpecErrorCode> = true;
void codesMatch;

/** The envelope for an error the client may see; anything else is internal_error. */
function toEnvelope(err: AppError): ErrorEnvelope {
  const error: ErrorEnvelope['error'] = { code: err.code, message: err.message };
  if (err.details && err.details.length > 0) error.details = err.details;
  // The facts' types are the contract's (src/errors.ts may not import generated/).
  if (err.facts) Object.assign(error, err.facts as Partial<ErrorEnvelope['error']>);
  return { error };
}

/** An error as the client sees it: status, envelope and the headers it adds (Retry-After). */
export interface ErrorAnswer {
  status: number;
  body: ErrorEnvelope;
  headers: Readonly<Record<string, string>>;
}

/**
 * The one place that turns errors into answers. An AppError is shown as it is; a database that
 * cannot be reached becomes 503 with Retry-After, and so does a pool whose every connection is busy
 * (reason `pool_saturated`: the operator's remedy differs); anything else is a 500 with a generic message, and
 * a description (type, SQLSTATE, message without SQL) goes to the log under the request id, never to
 * the client; the stack is logged at debug level only. Koa-free: a long-poll answered outside Koa
 * (detached-responses.ts) answers its errors with it too.
 */
export function toErrorAnswer(log: Logger, requestId: string, err: unknown): ErrorAnswer {
  let exposed: AppError;
  if (err instanceof AppError) exposed = err;
  else if (isPoolSaturated(err)) {
    log.warn({ requestId, ...describeError(err) }, 'database pool saturated');
    exposed = new ServerBusyError();
  } else if (isDatabaseUnavailable(err)) {
    log.warn({ requestId, ...describeError(err) }, 'database unavailable');
    exposed = new ServiceUnavailableError();
  } else {
    // No stack and no SQL in log lines; the stack only when debugging.
    log.error({ requestId, ...describeError(err) }, 'request failed');
    log.debug({ requestId, stack: (err as Error)?.stack }, 'request failed: stack');
    exposed = new AppError('internal_error', 500, 'an internal error occurred');
  }
  return { status: exposed.status, body: toEnvelope(exposed), headers: exposed.headers ?? {} };
}

/**
 * Answers a failed request with toErrorAnswer, telling `onRefused` of each 503 for want of a database
 * connection. An envelope is never cached (`no-store`, even where an
 * asset that failed half-way had set its own caching).
 */
export function handleErrors(log: Logger, onRefused?: (reason: RefusalReason) => void): Middleware<ApiState> {
  const answerError = (ctx: ApiContext, err: unknown) => {
    const answer = toErrorAnswer(log, ctx.state.requestId, err);
    const reason = answer.body.error.reason;
    if (answer.status === 503 && (reason === 'pool_saturated' || reason === 'database_unavailable')) onRefused?.(reason);
    ctx.status = answer.status;
    ctx.body = answer.body;
    for (const [name, value] of Object.entries(answer.headers)) ctx.set(name, value);
    ctx.set('Cache-Control', 'no-store');
  };
  // A .catch, not an awaiting frame: a request in flight holds one small callback here, not a suspended function.
  return (ctx, next) => next().catch((err: unknown) => answerError(ctx, err));
}
