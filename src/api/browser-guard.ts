import { isIP } from 'node:net';
import type { Middleware } from 'koa';
import type { Config } from '../config';
import { ForbiddenError } from '../errors';
import { isAuthOn } from './auth';
import type { ApiState } from './state';

/** Methods that change nothing (RFC 9110 §9.2.1): another site may make a browser send them, but never read the answer. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/** Addresses that mean "every interface": not a name anyone addresses the server by. */
const WILDCARD_ADDRESSES = new Set(['', '0.0.0.0', '::', '[::]']);

/** The host name of a Host header: lowercased, without the port; an IPv6 literal without its brackets. */
export function hostNameOf(host: string): string {
  const value = host.trim().toLowerCase();
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    return end > 0 ? value.slice(1, end) : value;
  }
  return value.replace(/:\d*$/, '');
}

/**
 * True when a browser may address this server as `name`. IP addresses always may: DNS rebinding
 * needs a name that an attacker's DNS answers, and a page at an IP address can only be that
 * machine's own. `localhost` and `*.localhost` are loopback by definition (RFC 6761; browsers
 * resolve them without DNS). Anything else must be listed: exactly, as `*.suffix` for the subdomains
 * of `suffix`, or `*` for any name.
 */
export function isHostAllowed(name: string, allowed: readonly string[]): boolean {
  if (isIP(name) !== 0 || name === 'localhost' || name.endsWith('.localhost')) return true;
  return allowed.some((pattern) => {
    const p = pattern.toLowerCase();
    if (p === '*') return true;
    return p.startsWith('*.') ? name.endsWith(p.slice(1)) : name === p;
  });
}

/**
 * True when `origin` names the host and port the request was sent to (its Host header). The scheme
 * is not compared: behind a proxy that terminates TLS the server is spoken to in http while the
 * page says https, and no other site can serve a page from this server's own host and port.
 */
export function isSameOrigin(origin: string, host: string): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false; // `null` (sandboxed frames, file: pages) and junk are nobody's origin
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
  const defaultPort = url.protocol === 'https:' ? ':443' : ':80';
  const addressed = host.trim().toLowerCase();
  return url.host === (addressed.endsWith(defaultPort) ? addressed.slice(0, -defaultPort.length) : addressed);
}

/**
 * Keeps web pages the operator happens to visit from using a server that has no API tokens (a dev
 * server on localhost): with auth off, a bodiless `POST …/cancel` from any site is a CORS "simple
 * request" the browser sends without asking, and DNS rebinding lets a site read answers too.
 *
 * - A request that may change state and carries an `Origin` other than this server's is refused.
 *   Requests without `Origin` (curl, SDKs, server-to-server) pass: browsers always send one with
 *   such a request.
 * - A request whose `Host` is not an allowed name is refused (DNS rebinding keeps the attacker's
 *   name in `Host`). A request without `Host` (HTTP/1.0) is not from a browser and passes.
 *
 * With API tokens (client or worker) configured neither is needed: browsers never attach a bearer
 * token by themselves, so a cross-origin request is decided by its token, and what stays public (the
 * dashboard's shell, the docs, /metrics without a metrics token) holds no secret. The Host check
 * then runs only when the operator listed hosts explicitly, so a deployment with tokens behind a
 * proxy under a public name keeps working without new settings.
 *
 * Liveness and readiness are exempt: orchestrators probe them by pod IP or by whatever name they
 * like, and they change nothing and tell nothing. The exemption compares exact paths, as the router
 * does, so a variant of them is checked like any other path.
 */
export function refuseCrossSiteRequests(config: Readonly<Config>): Middleware<ApiState> {
  const authOff = !isAuthOn(config);
  const checkHost = authOff || config.http.allowedHosts.length > 0;
  const allowed = WILDCARD_ADDRESSES.has(config.host) ? config.http.allowedHosts : [...config.http.allowedHosts, config.host];
  const probes = new Set([`${config.basePath}/healthz`, `${config.basePath}/readyz`]);
  // Not async (a throw here still reaches the error middleware as a rejection, through koa-compose):
  // nothing runs after next(), so a long-poll parked below holds no suspended frame here.
  return (ctx, next) => {
    if (probes.has(ctx.path)) return next();
    const host = ctx.get('Host');
    if (checkHost && host !== '' && !isHostAllowed(hostNameOf(host), allowed)) {
      throw new ForbiddenError(`host ${JSON.stringify(hostNameOf(host).slice(0, 100))} is not allowed; set STEPWISE_ALLOWED_HOSTS`);
    }
    const origin = ctx.get('Origin');
    if (authOff && origin !== '' && !SAFE_METHODS.has(ctx.method) && !isSameOrigin(origin, host)) {
      throw new ForbiddenError(`cross-origin request refused: origin ${JSON.stringify(origin.slice(0, 100))} is not this server's`);
    }
    return next();
  };
}
