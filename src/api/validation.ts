import type { Middleware } from 'koa';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { isExecutionId } from '../domain/ids';
import { ExecutionNotFoundError, InvalidDataError, type ErrorDetail } from '../errors';
import type { SpecOperation } from './spec';
import type { ApiState } from './state';
import { isStorableText } from '../domain/storable-text';

const MAX_DETAILS = 20;

/** Ajv's errors as the envelope's `details`: `where` plus the JSON pointer of the offending value. */
export function toErrorDetails(where: string, errors: readonly ErrorObject[] | null | undefined): ErrorDetail[] {
  return (errors ?? []).slice(0, MAX_DETAILS).map((e) => {
    let at = e.instancePath;
    const params = e.params as Record<string, unknown>;
    if (typeof params.additionalProperty === 'string') at += `/${params.additionalProperty}`;
    if (typeof params.missingProperty === 'string') at += `/${params.missingProperty}`;
    if (typeof params.unevaluatedProperty === 'string') at += `/${params.unevaluatedProperty}`;
    const message = e.keyword === 'enum' ? `${e.message ?? 'is invalid'}: ${(params.allowedValues as unknown[]).join(', ')}` : (e.message ?? 'is invalid');
    return { path: `${where}${at}`, message };
  });
}

function check(validate: ValidateFunction, value: unknown, where: string, what: string): void {
  if (!validate(value)) throw new InvalidDataError(`${what} is invalid`, toErrorDetails(where, validate.errors));
}

/** Path and query text reaches SQL as parameters; PostgreSQL refuses NUL and unpaired surrogates. */
function assertStorable(values: Record<string, unknown>, where: string): void {
  const bad = Object.entries(values).filter(([, v]) => [v].flat().some((s) => typeof s === 'string' && !isStorableText(s)));
  if (bad.length > 0) {
    throw new InvalidDataError(`${where} holds text that cannot be stored`, bad.map(([name]) => ({ path: `${where}/${name}`, message: 'must not contain U+0000 or unpaired surrogates' })));
  }
}

/**
 * Checks a request against its operation in openapi.yaml, in the contract's order: the execution id
 * first (anything that is not a valid id is simply not found, before any SQL), then path, query and
 * body. Query values are coerced and defaulted by the schema, then clamped (`x-clamp-maximum`).
 * The result is `ctx.state.input`.
 */
export function validateRequest(op: SpecOperation): Middleware<ApiState> {
  // Not async: nothing runs after next(), so a long-poll parked below holds no suspended frame here.
  return (ctx, next) => {
    const params = { ...(ctx as unknown as { params?: Record<string, string> }).params };
    if ('id' in params && !isExecutionId(params.id)) throw new ExecutionNotFoundError(params.id);
    // Ids are compared as PostgreSQL writes them (lower case) everywhere past this point: in
    // transitions' answers, the long-poll and stream subscriptions, and webhook lookups.
    if ('id' in params) params.id = params.id.toLowerCase();
    if ('webhook_id' in params) params.webhook_id = params.webhook_id.toLowerCase();
    check(op.validatePath, params, 'path', 'path');
    assertStorable(params, 'path');
    // ctx.query is a fresh null-prototype object; copy it so defaults and coercion stay ours.
    const query: Record<string, unknown> = op.strictQuery ? { ...ctx.query } : {};
    assertStorable(query, 'query');
    check(op.validateQuery, query, 'query', 'query');
    // Ajv's coercion turns "1e400" and "Infinity" into Infinity after its number checks have run.
    const infinite = Object.keys(query).filter((name) => typeof query[name] === 'number' && !Number.isFinite(query[name]));
    if (infinite.length > 0) throw new InvalidDataError('query is invalid', infinite.map((name) => ({ path: `query/${name}`, message: 'must be a finite number' })));
    if (typeof query.parent_execution_id === 'string') query.parent_execution_id = query.parent_execution_id.toLowerCase();
    for (const [name, max] of Object.entries(op.clamps)) {
      if (typeof query[name] === 'number' && (query[name] as number) > max) query[name] = max;
    }
    // Declared headers only: a repeated one (an array in Node) fails its string schema.
    const headers: Record<string, unknown> = {};
    for (const name of op.headerParams) if (ctx.headers[name] !== undefined) headers[name] = ctx.headers[name];
    assertStorable(headers, 'header');
    check(op.validateHeaders, headers, 'header', 'headers');
    let body = ctx.state.body;
    if (op.body) {
      if (body === undefined) {
        if (op.body.required) throw new InvalidDataError('request body is required', [{ path: 'body', message: 'is required' }]);
      } else check(op.body.validate, body, 'body', 'request body');
    }
    ctx.state.input = { params, query, headers, body };
    return next();
  };
}
