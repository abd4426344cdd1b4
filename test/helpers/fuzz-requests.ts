import { deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import type { CompiledSpec, SpecOperation } from '../../src/api/spec';
import { findSpecViolations, recordResponse, type RecordedResponse } from './spec-check';

/**
 * Generated bad (and some good) requests for every operation of openapi.yaml, for property tests
 * (`test/api/fuzz.test.ts`, a few hundred runs) and longer fuzzing runs (10,000+). The shapes come from
 * the spec itself: operations, parameter names and the request-body examples, which are mutated.
 */
export interface FuzzRequest {
  operationId: string;
  method: string;
  /** Path after the base path, query string included. */
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** A Content-Encoding, and the bytes sent in place of `body`: it compressed, or junk that does not decode. */
  encoded?: { encoding: string; bytes: Uint8Array };
}

export interface FuzzContext {
  spec: CompiledSpec;
  /** Ids of executions that exist, so some requests get past the 404. */
  knownIds: readonly string[];
  /** A valid bearer token, when the server has auth on. */
  token?: string;
}

const HUGE_BODY = JSON.stringify({ task: 'x', data: 'y'.repeat(1_100_000) });

/** Header-safe text: fetch refuses control characters and non-Latin-1 in header values. */
const headerText = fc.string({ maxLength: 60 }).map((s) => s.replace(/[^\x20-\x7e]/g, '').trim());

/** Path segments: plausible, junk, huge, unicode, SQL-ish; never '.' or '..' (URLs would fold them away). */
function segment(known: readonly string[]): fc.Arbitrary<string> {
  return fc
    .oneof(
      { weight: 4, arbitrary: known.length ? fc.constantFrom(...known) : fc.uuid({ version: 7 }) },
      { weight: 2, arbitrary: fc.uuid() },
      { weight: 2, arbitrary: fc.string({ minLength: 1, maxLength: 40 }) },
      { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }) },
      { weight: 1, arbitrary: fc.constantFrom("1' OR '1'='1", '%', '%00', '-1', '1e400', 'null', 'undefined', '__proto__', 'constructor', ' ') },
      { weight: 1, arbitrary: fc.integer({ min: 300, max: 5000 }).map((n) => '9'.repeat(n)) },
    )
    .filter((s) => s !== '.' && s !== '..');
}

/** Query values: numbers around and far beyond the limits, non-numbers, repeats. */
const queryValue = fc.oneof(
  fc.integer({ min: -10, max: 4000 }).map(String),
  fc.constantFrom('1e400', '-0', '99999999999999999999', '0x10', '1.5', '', 'NaN', 'Infinity', 'asc', 'desc', 'pending', 'DESC', 'running', 'a\u0000b'),
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'grapheme', maxLength: 10 }),
);

function query(op: SpecOperation): fc.Arbitrary<string> {
  const names = fc.oneof(
    { weight: 4, arbitrary: op.queryParams.length ? fc.constantFrom(...op.queryParams) : fc.constant('limit') },
    { weight: 1, arbitrary: fc.string({ minLength: 1, maxLength: 12 }) },
  );
  const pairs = fc
    .array(fc.tuple(names, queryValue), { minLength: 1, maxLength: 4 })
    .map((list) => `?${list.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&')}`);
  // Half without a query string, so the other parts of a request get exercised too.
  return fc.oneof(fc.constant(''), pairs);
}

function nested(depth: number, leaf: string): string {
  return '['.repeat(depth) + leaf + ']'.repeat(depth);
}

/** The operation's request-body example from openapi.yaml (or {}), mutated in typical wrong ways. */
function body(example: unknown): fc.Arbitrary<string | undefined> {
  const obj = example && typeof example === 'object' && !Array.isArray(example) ? (example as Record<string, unknown>) : {};
  const keys = Object.keys(obj);
  const mutated = fc
    .record({
      drop: keys.length ? fc.subarray(keys) : fc.constant([] as string[]),
      retype: fc.dictionary(keys.length ? fc.constantFrom(...keys) : fc.string(), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 2 }),
      extra: fc.dictionary(fc.string({ maxLength: 15 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 2 }),
    })
    .map(({ drop, retype, extra }) => {
      const copy: Record<string, unknown> = { ...obj, ...retype, ...extra };
      for (const k of drop) delete copy[k];
      return JSON.stringify(copy);
    });
  // The example as it is, and with a fresh idempotency key so it creates rather than repeats.
  const fresh = fc.string({ minLength: 1, maxLength: 20 }).map((k) => JSON.stringify('idempotency_key' in obj ? { ...obj, idempotency_key: k } : (example ?? {})));
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant(JSON.stringify(example ?? {})) },
    { weight: 4, arbitrary: fresh },
    { weight: 5, arbitrary: mutated },
    { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)) },
    { weight: 2, arbitrary: fc.string({ maxLength: 80 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }).map((s) => JSON.stringify({ task: s, data: s })) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 20000 }).map((n) => nested(n, '1')) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 200 }).map((n) => `{"task":"x","data":${nested(n, '{}')}}`) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '{"__proto__":{"x":1}}', '{"task":1e400}', '{"task":"x","data":-0}', '\ufeff{}', 'null', '""', '[]', '{}{}',
        '{"task":"approve-order","data":{"orderId":"a\\u0000b"}}', '{"task":"approve-order","data":"\\ud800"}', '{"approved":true,"\\u0000":1}', '"\\udc00x"',
        '{"task":"approve-order","data":{"orderId":"o"},"start_at":"9999-12-31T23:59:60Z"}', '{"task":"approve-order","start_at":"0000-01-01T00:00:00+14:00"}',
        '{"task":"approve-order","start_at":"2024-02-30T00:00:00Z"}', '{"task":"approve-order","start_at":"2024-06-30T23:59:60+09:00"}',
      ),
    },
    // Numbers JSON can write but a double cannot hold: parsed as Infinity, stored as null.
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom('1e400', '-1e400', '1E+309', '9'.repeat(400), '-0', '1e-400', '2e308'), fc.constantFrom('approve-order', 'x'))
        .map(([n, task]) => fc.constantFrom(`{"task":"${task}","data":{"orderId":"o","amount":${n}}}`, n, `[${n}]`, `{"approved":${n}}`, `{"task":"${task}","data":{"n":[${n}]}}`))
        .chain((a) => a),
    },
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constant(HUGE_BODY) },
  );
}

const contentType = fc.oneof(
  { weight: 10, arbitrary: fc.constant('application/json') },
  { weight: 1, arbitrary: fc.constantFrom('application/json; charset=utf-8', 'application/problem+json', 'application/json; charset=latin1') },
  { weight: 2, arbitrary: fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=z', 'application/xml', 'image/png') },
  { weight: 1, arbitrary: headerText },
  { weight: 1, arbitrary: fc.constant(undefined) },
);

/** Content-Encodings: mostly none; else the body compressed as said, cut short, or bytes that are not compressed at all. */
const encoding = fc.oneof(
  { weight: 12, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'klingon', 'gzip, gzip'), fc.constantFrom('compressed', 'truncated', 'junk')) },
);

function encode(body: string, [name, how]: [string, string]): { encoding: string; bytes: Uint8Array } {
  const compressed = name.startsWith('gzip') ? gzipSync(body) : name === 'deflate' ? deflateSync(body) : Buffer.from(body);
  const bytes = how === 'compressed' ? compressed : how === 'truncated' ? compressed.subarray(0, Math.max(1, compressed.length >> 1)) : Buffer.from(`\x00\xff${body}`, 'latin1');
  return { encoding: name, bytes };
}

/** Requests against one operation. */
function requestFor(op: SpecOperation, ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  const doc = ctx.spec.document as { paths: Record<string, Record<string, { requestBody?: { content?: Record<string, { example?: unknown }> } }>> };
  const example = doc.paths[op.path][op.method.toLowerCase()].requestBody?.content?.['application/json']?.example;
  const auth = fc.oneof(
    { weight: 8, arbitrary: fc.constant(ctx.token ? `Bearer ${ctx.token}` : undefined) },
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: headerText.map((s) => `Bearer ${s}`) },
  );
  return fc
    .record({
      params: fc.record(Object.fromEntries(op.pathParams.map((p) => [p, segment(p === 'id' ? ctx.knownIds : ['approval', 'shipment'])]))),
      query: query(op),
      body: op.method === 'POST' ? body(example) : fc.constant(undefined),
      contentType,
      auth,
      requestId: fc.option(headerText, { nil: undefined }),
      encoding,
    })
    .map(({ params, query: q, body: b, contentType: ct, auth: a, requestId, encoding: enc }) => {
      const path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent((params as Record<string, string>)[name]));
      const headers: Record<string, string> = {};
      if (b !== undefined && ct !== undefined) headers['Content-Type'] = ct;
      if (a !== undefined) headers.Authorization = a;
      if (requestId) headers['X-Request-Id'] = requestId;
      const encoded = b !== undefined && enc !== undefined ? encode(b, enc) : undefined;
      if (encoded) headers['Content-Encoding'] = encoded.encoding;
      return { operationId: op.operationId, method: op.method, path: `${path}${q}`, headers, body: b, encoded };
    });
}

/**
 * Requests spread over every operation of the contract. The worker protocol's many batch operations
 * share a third of the weight of one client operation each, so they do not thin out the others.
 */
export function fuzzRequests(ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  const tagsOf = (op: SpecOperation) => ((ctx.spec.document as { paths: Record<string, Record<string, { tags?: string[] }>> }).paths[op.path][op.method.toLowerCase()].tags ?? []);
  return fc.oneof(...[...ctx.spec.operations.values()].map((op) => ({ weight: tagsOf(op).includes('Worker protocol') ? 1 : 3, arbitrary: requestFor(op, ctx) })));
}

/** Operations whose valid requests legitimately stay open: the long-polls and the event streams. */
const LASTING = new Set(['waitForExecution', 'streamExecution', 'streamExecutionChanges', 'claimActivations']);

/**
 * Sends one fuzz request (bodies as raw bytes, so malformed text arrives as it is). A valid long-poll
 * or stream legitimately stays open, so it is abandoned after `patienceMs` and reported as undefined
 * (a stream that ended by then is checked like any answer); any other operation that does not answer
 * within `hangMs` is a hang, and rejects (kept well above `patienceMs`: on a loaded machine an ordinary
 * request may take a few hundred milliseconds).
 */
export async function sendFuzzRequest(baseUrl: string, req: FuzzRequest, patienceMs = 2000, hangMs = Math.max(patienceMs, 15000)): Promise<RecordedResponse | undefined> {
  const lasting = LASTING.has(req.operationId);
  try {
    const response = await fetch(`${baseUrl}${req.path}`, {
      method: req.method,
      headers: req.headers,
      body: req.encoded ? new Blob([Buffer.from(req.encoded.bytes)]) : req.body === undefined ? undefined : new Blob([req.body]),
      signal: AbortSignal.timeout(lasting ? patienceMs : hangMs),
    });
    return await recordResponse(req.method, req.path, response);
  } catch (err) {
    if ((err as Error).name === 'TimeoutError' && lasting) return undefined;
    throw err;
  }
}

/** Problems with the answer: any 5xx, a missing envelope on an error, or anything the spec does not list. */
export function checkFuzzResponse(req: FuzzRequest, res: RecordedResponse): string[] {
  const problems = findSpecViolations(res, req.operationId);
  if (res.status >= 500) problems.unshift(`server error ${res.status}: ${res.text.slice(0, 200)}`);
  const envelope = res.body as { error?: { code?: unknown } } | undefined;
  if (res.status >= 400 && typeof envelope?.error?.code !== 'string') problems.unshift('error answer without the envelope');
  return problems;
}
