import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Which hosts webhooks may reach. A webhook is a request the server makes on a client's behalf, to a
 * URL the client chose: without these checks it could read cloud metadata (credentials) or reach
 * services inside the network. The URL is checked when the webhook is subscribed, and the address
 * actually connected to at every delivery (a name may resolve elsewhere later: DNS rebinding), through
 * the `lookup` the sender's sockets use.
 */

/** A resolver of all a name's addresses; dns.lookup by default, a fake in tests. */
export type ResolveHost = (hostname: string) => Promise<ReadonlyArray<{ address: string; family: number }>>;

export interface TargetPolicy {
  /** Allow private, loopback, carrier-grade NAT and unique-local addresses (`webhooks.allowPrivateTargets`). */
  allowPrivate: boolean;
  resolve?: ResolveHost;
}

/** A target the policy refuses, with why. */
export class TargetRefusedError extends Error {
  override name = 'TargetRefusedError';
}

/** Endpoints of cloud providers' instance metadata (credentials), refused always, whatever their range. */
const METADATA_ADDRESSES = new Set(
  [
    '169.254.169.254', // AWS, GCP, Azure, DigitalOcean, OpenStack…
    '169.254.170.2', // AWS ECS task metadata and credentials
    '169.254.170.23', // AWS EKS pod identity
    '100.100.100.200', // Alibaba Cloud
    '168.63.129.16', // Azure WireServer
    '192.0.0.192', // Oracle Cloud
    'fd00:ec2::254', // AWS over IPv6
    'fd00:ec2::23', // AWS EKS pod identity over IPv6
    'fd20:ce::254', // GCP over IPv6
  ].map((a) => ipaddr.parse(a).toNormalizedString()),
);

/** Names of metadata endpoints, refused before any lookup (they resolve only inside the cloud). */
const METADATA_HOSTS = new Set(['metadata.google.internal', 'metadata.goog', 'metadata', 'instance-data', 'instance-data.ec2.internal', 'metadata.tencentyun.com']);

/** Ranges (ipaddr.js's names) no webhook may reach. */
const FORBIDDEN_RANGES: Readonly<Record<string, string>> = {
  linkLocal: 'a link-local address',
  unspecified: 'an unspecified address',
  broadcast: 'a broadcast address',
  multicast: 'a multicast address',
  reserved: 'a reserved address',
  discard: 'a discard-only address',
  benchmarking: 'a benchmarking address',
};

/** Ranges only an operator's `allowPrivateTargets` opens. */
const PRIVATE_RANGES: Readonly<Record<string, string>> = {
  private: 'a private address',
  loopback: 'a loopback address',
  uniqueLocal: 'a unique-local address',
  carrierGradeNat: 'a carrier-grade NAT address',
  deprecatedSiteLocal: 'a site-local address',
};

const v4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);

/**
 * The IPv4 address an IPv6 one carries and reaches, else the address itself: IPv4-mapped
 * (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d), NAT64 with the well-known prefix (64:ff9b::/96)
 * or the local-use one (64:ff9b:1::/48, RFC 8215, the address in bits 48-63 and 72-87), SIIT
 * (RFC 6145), 6to4 (2002:a.b.c.d::/48) and Teredo (2001::/32, the client's address inverted in the
 * last 32 bits). A webhook aimed at any of them is judged by the IPv4 address it would reach.
 */
function effectiveAddress(address: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  if (address.kind() === 'ipv4') return address;
  const v6 = address as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address();
  const p = v6.parts;
  const zeroes = (from: number, to: number) => p.slice(from, to).every((x) => x === 0);
  // ::a.b.c.d; :: and ::1 themselves stay what they are (unspecified, loopback).
  if (zeroes(0, 6) && p[6] !== 0) return v4(p[6], p[7]);
  if (p[0] === 0x64 && p[1] === 0xff9b) {
    if (zeroes(2, 6)) return v4(p[6], p[7]);
    if (p[2] === 1) return v4(p[3], ((p[4] & 0xff) << 8) | (p[5] >> 8));
  }
  if (v6.range() === 'rfc6145') return v4(p[6], p[7]);
  if (p[0] === 0x2002) return v4(p[1], p[2]);
  if (p[0] === 0x2001 && p[1] === 0) return v4(p[6] ^ 0xffff, p[7] ^ 0xffff);
  return v6;
}

/**
 * Why a webhook may not reach `address` (an IPv4 or IPv6 literal) under the policy, or undefined when it
 * may. Metadata endpoints and the forbidden ranges are refused always; the private ranges unless
 * allowed; anything else (public unicast) is allowed.
 */
export function refusalOfAddress(address: string, allowPrivate: boolean): string | undefined {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = effectiveAddress(ipaddr.parse(address));
  } catch {
    return `${address} is not an IP address`;
  }
  const carried = parsed.toString();
  // An IPv6 address that carries an IPv4 one is named with it: "2002:a9fe:a9fe:: (169.254.169.254)".
  const shown = parsed.kind() === 'ipv4' && net.isIPv6(address) ? `${address} (${carried})` : carried;
  if (METADATA_ADDRESSES.has(parsed.toNormalizedString())) return `${shown} is a cloud metadata address, which webhooks may never target`;
  const range = parsed.range();
  const forbidden = FORBIDDEN_RANGES[range];
  if (forbidden) return `${shown} is ${forbidden}, which webhooks may never target`;
  const restricted = PRIVATE_RANGES[range];
  if (restricted && !allowPrivate) return `${shown} is ${restricted}, which webhooks may target only when the operator allows private targets (STEPWISE_WEBHOOKS_ALLOW_PRIVATE)`;
  return undefined;
}

/** The URL's host as a lookup wants it: lower case, without IPv6 brackets or a trailing dot. */
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '').toLowerCase();
}

const defaultResolve: ResolveHost = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

/** How long a subscription waits for its target's name to resolve. */
const RESOLVE_TIMEOUT_MS = 5000;

/**
 * Why a webhook may not target `raw`, or undefined when it may: the URL must be http or https without
 * credentials, and every address its host resolves to must pass refusalOfAddress (a name that does
 * not resolve is refused too). Subscriptions call it; deliveries check again at connect time.
 */
export async function refusalOfUrl(raw: string, policy: TargetPolicy): Promise<string | undefined> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `must be an http or https URL, not ${url.protocol.replace(/:$/, '')}`;
  if (url.username !== '' || url.password !== '') return 'must not carry credentials (the signature authenticates deliveries)';
  const host = hostOf(url);
  if (host === '') return 'must name a host';
  if (METADATA_HOSTS.has(host)) return `${host} is a cloud metadata endpoint, which webhooks may never target`;
  if (net.isIP(host)) return refusalOfAddress(host, policy.allowPrivate);
  let addresses: ReadonlyArray<{ address: string }>;
  try {
    addresses = await withTimeout((policy.resolve ?? defaultResolve)(host), RESOLVE_TIMEOUT_MS);
  } catch (err) {
    return `its host ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
  }
  if (addresses.length === 0) return `its host ${host} does not resolve`;
  for (const { address } of addresses) {
    const refusal = refusalOfAddress(address, policy.allowPrivate);
    // What the server's own DNS answered stays inside: the answer says only what kind of address it is.
    if (refusal) return `its host ${host} resolves to ${refusal.replace(/^.*? is /, '')}`;
  }
  return undefined;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`no answer within ${ms} ms`), { code: 'ETIMEOUT' })), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The check at connect time: throws TargetRefusedError when the URL's host is an address literal or a
 * metadata name the policy refuses (a literal is connected to without any lookup, so the lookup below
 * would never see it).
 */
export function assertLiteralTargetAllowed(url: URL, policy: TargetPolicy): void {
  const host = hostOf(url);
  if (METADATA_HOSTS.has(host)) throw new TargetRefusedError(`${host} is a cloud metadata endpoint`);
  if (net.isIP(host)) {
    const refusal = refusalOfAddress(host, policy.allowPrivate);
    if (refusal) throw new TargetRefusedError(refusal);
  }
}

/**
 * A `lookup` for sockets (net.connect's option) that resolves as usual and fails the connection with
 * TargetRefusedError when any address of the name is refused, so a delivery only ever connects to
 * addresses checked at that moment.
 */
export function guardedLookup(policy: TargetPolicy): net.LookupFunction {
  const resolve = policy.resolve ?? defaultResolve;
  return ((hostname: string, options: dns.LookupOptions, callback: (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void) => {
    resolve(hostname).then(
      (found) => {
        if (found.length === 0) return callback(Object.assign(new Error(`${hostname} does not resolve`), { code: 'ENOTFOUND' }), '', 0);
        for (const { address } of found) {
          const refusal = refusalOfAddress(address, policy.allowPrivate);
          if (refusal) return callback(new TargetRefusedError(`${hostname} resolves to ${refusal.replace(/^.*? is /, '')}`), '', 0);
        }
        const wanted = options.family === 4 || options.family === 6 ? found.filter((a) => a.family === options.family) : found;
        if (wanted.length === 0) return callback(Object.assign(new Error(`${hostname} has no IPv${options.family} address`), { code: 'ENOTFOUND' }), '', 0);
        if (options.all) return callback(null, wanted.map((a) => ({ address: a.address, family: a.family })));
        callback(null, wanted[0].address, wanted[0].family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  }) as net.LookupFunction;
}
