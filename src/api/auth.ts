import { createHash, timingSafeEqual } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Config } from '../config';
import { ForbiddenError, UnauthorizedError, type ForbiddenReason } from '../errors';
import type { TokenRole } from './spec';
import type { ApiState } from './state';
import type { Authenticator } from './typed';

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

/** The kinds of configured token: client (auth.tokens), worker (auth.workerTokens), metrics (metrics.token). */
export type TokenKind = TokenRole | 'metrics';

type TokenConfig = Pick<Readonly<Config>, 'auth' | 'metrics'>;

/** True when API tokens of either kind are configured: then every bearerAuth operation needs one. */
export function isAuthOn(config: TokenConfig): boolean {
  return config.auth.tokens.length + config.auth.workerTokens.length > 0;
}

/**
 * The kind of the token an `Authorization: Bearer` header carries, or undefined for none or an
 * unknown one. Every configured token is compared (no early exit), as in isTokenAccepted. A client
 * token that is also the metrics token reads as client, which /metrics accepts too; config.ts
 * refuses a worker token shared with any other kind.
 */
export function createTokenKindReader(config: TokenConfig): (authorization: string | undefined) => TokenKind | undefined {
  const entries: Array<readonly [Buffer, TokenKind]> = [
    ...config.auth.tokens.map((t) => [digest(t), 'client'] as const),
    ...config.auth.workerTokens.map((t) => [digest(t), 'worker'] as const),
    ...(config.metrics.token === undefined ? [] : [[digest(config.metrics.token), 'metrics'] as const]),
  ];
  return (authorization) => {
    const match = BEARER.exec(authorization ?? '');
    if (match === null) return undefined;
    const candidate = digest(match[1]);
    let kind: TokenKind | undefined;
    for (const [d, k] of entries) if (timingSafeEqual(d, candidate) && kind === undefined) kind = k;
    return kind;
  };
}

/** Who may pass one door: nobody is asked while it is open; else the kinds it accepts. */
export interface Gate {
  open: boolean;
  accepts: readonly TokenKind[];
  /** What a known token of another kind is told (403): the kind needed, in words and as a code. */
  needs: string;
  reason: ForbiddenReason;
}

/** The verdict on a request carrying a token of kind `presented` (undefined: none, or unknown). */
export function decideAccess(gate: Gate, presented: TokenKind | undefined): 'allow' | 'unauthorized' | 'forbidden' {
  if (gate.open) return 'allow';
  if (presented === undefined) return 'unauthorized';
  return gate.accepts.includes(presented) ? 'allow' : 'forbidden';
}

/**
 * The doors of the API: client operations, the worker protocol (openapi.yaml's `Worker protocol`
 * tag) and GET /metrics. Either API door is open only while no API token of any kind is set: with
 * worker tokens alone, clients are refused, not let in.
 */
export function createGates(config: TokenConfig): Record<TokenRole | 'metrics', Gate> {
  const open = !isAuthOn(config);
  return {
    client: { open, accepts: ['client'], needs: 'a client token (auth.tokens)', reason: 'client_token_required' },
    worker: { open, accepts: ['worker'], needs: 'a worker token (auth.workerTokens)', reason: 'worker_token_required' },
    metrics: { open: config.metrics.token === undefined, accepts: ['metrics', 'client'], needs: 'the metrics token or a client token', reason: 'metrics_token_required' },
  };
}

/** Middleware that lets through what `gate` allows: 401 for no token or an unknown one, 403 for a known token of another kind. */
function requireToken(gate: Gate, kindOf: (authorization: string | undefined) => TokenKind | undefined): Middleware<ApiState> {
  // Not async: nothing runs after next(), so a long-poll parked below holds no suspended frame here.
  return (ctx, next) => {
    if (gate.open) return next();
    const presented = kindOf(ctx.get('Authorization'));
    const verdict = decideAccess(gate, presented);
    if (verdict === 'unauthorized') throw new UnauthorizedError();
    if (verdict === 'forbidden') throw new ForbiddenError(`this operation needs ${gate.needs}; a ${String(presented)} token may not use it`, gate.reason);
    return next();
  };
}

/**
 * The authenticators of openapi.yaml's security schemes, mounted on every operation by its declared
 * scheme and, under `bearerAuth`, by its role (never by matching path strings, which case or slash
 * variants could slip past). Tokens are never logged.
 */
export function createAuthenticators(config: TokenConfig): Record<'bearerAuth' | 'metricsToken', Authenticator> {
  const kindOf = createTokenKindReader(config);
  const gates = createGates(config);
  const byRole = { client: requireToken(gates.client, kindOf), worker: requireToken(gates.worker, kindOf) };
  const metrics = requireToken(gates.metrics, kindOf);
  return { bearerAuth: (op) => byRole[op.role], metricsToken: () => metrics };
}

/**
 * The tokens GET /metrics accepts: none (it is public, as before) without a metrics token; with one,
 * that token and every client token, so a small setup needs a single token while a scraper can be
 * given one that opens nothing else. Worker tokens never open it.
 */
export function metricsTokens(config: TokenConfig): string[] {
  return config.metrics.token === undefined ? [] : [config.metrics.token, ...config.auth.tokens];
}
