import { createHash, timingSafeEqual } from 'node:crypto';
import type { Middleware } from 'koa';
import { UnauthorizedError } from '../errors';
import type { ApiState } from './state';

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
 * Bearer-token auth, mounted on every operation openapi.yaml protects (by the route itself, never by
 * matching path strings, which case or slash variants could slip past). With no tokens configured it
 * lets every request through (the server logs at start-up that auth is off). Tokens are never logged.
 */
export function requireBearerToken(tokens: readonly string[]): Middleware<ApiState> {
  const digests = tokens.map(digest);
  return async (ctx, next) => {
    if (digests.length > 0) {
      const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(ctx.get('Authorization'));
      if (!match || !isTokenAccepted(digests, match[1])) throw new UnauthorizedError();
    }
    await next();
  };
}
