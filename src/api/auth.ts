import { createHash, timingSafeEqual } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Config } from '../config';
import { UnauthorizedError } from '../errors';
import type { ApiState } from './state';

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * True when `presented` equals one of the tokens. Comparing SHA-256 digests gives timingSafeEqual
 * equal-length inputs whatever the lengths, and every token is compared (no early exit), so the time
 * taken says nothing about how close a guess was or which token matched.
 */
export function isTokenAccepted(digests: readonly Buffer[], presented: string): boolean {
  const candidate = digest(presented);
  let accepted = false;
  for (const d of digests) accepted = timingSafeEqual(d, candidate) || accepted;
  return accepted;
}

/**
 * A check of an `Authorization` header against `tokens`: true for `Bearer <one of them>`, and for
 * anything at all when `tokens` is empty (that check is off). Koa-free, so the worker's own metrics
 * server uses it too.
 */
export function createBearerCheck(tokens: readonly string[]): (authorization: string | undefined) => boolean {
  const digests = tokens.map(digest);
  return (authorization) => {
    if (digests.length === 0) return true;
    const match = BEARER.exec(authorization ?? '');
    return match !== null && isTokenAccepted(digests, match[1]);
  };
}

/**
 * Bearer-token auth, mounted on every operation openapi.yaml protects (by the route itself, never by
 * matching path strings, which case or slash variants could slip past). With no tokens configured it
 * lets every request through (the server logs at start-up that auth is off). Tokens are never logged.
 */
export function requireBearerToken(tokens: readonly string[]): Middleware<ApiState> {
  const isAccepted = createBearerCheck(tokens);
  // Not async: nothing runs after next(), so a long-poll parked below holds no suspended frame here.
  return (ctx, next) => {
    if (!isAccepted(ctx.get('Authorization'))) throw new UnauthorizedError();
    return next();
  };
}

/**
 * The tokens GET /metrics accepts: none (it is public, as before) without a metrics token; with one,
 * that token and every API token, so a small setup needs a single token while a scraper can be given
 * one that opens nothing else.
 */
export function metricsTokens(config: Pick<Readonly<Config>, 'auth' | 'metrics'>): string[] {
  return config.metrics.token === undefined ? [] : [config.metrics.token, ...config.auth.tokens];
}
