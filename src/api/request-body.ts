import type { IncomingMessage } from 'node:http';
import bodyParser from 'koa-bodyparser';
import type { Middleware } from 'koa';
import { InvalidDataError, InvalidJsonError, PayloadTooLargeError, UnsupportedMediaTypeError } from '../errors';
import type { ApiState } from './state';
import { findUnstorableText } from './storable-text';

const JSON_TYPES = ['application/json', '+json'];
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]+)/i;

/**
 * Deepest nesting of arrays and objects in JSON text, found by a scan of the text rather than a
 * recursive walk of the parsed value, so a hostile body cannot exhaust the stack. Stops early once
 * `limit` is passed.
 */
export function measureJsonDepth(text: string, limit: number): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      depth++;
      if (depth > max) {
        max = depth;
        if (max > limit) return max;
      }
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return max;
}

/** A `__proto__` key in valid JSON is refused rather than silently dropped. */
function protoKeyError(): InvalidDataError {
  return new InvalidDataError('request body must not contain a "__proto__" key', [{ path: 'body', message: 'must not contain "__proto__"' }]);
}

/** What @hapi/bourne (co-body's parser) looks for before it scans a parsed body for `__proto__` keys. */
const SUSPECT_PROTO =
  /"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"\s*:/;

/** True when an object anywhere in `value` has an own `__proto__` key (JSON.parse makes one). Iterative. */
function hasProtoKey(value: object): boolean {
  const stack: object[] = [value];
  while (stack.length > 0) {
    const node = stack.pop() as object;
    if (Object.prototype.hasOwnProperty.call(node, '__proto__')) return true;
    for (const item of Object.values(node)) if (item !== null && typeof item === 'object') stack.push(item as object);
  }
  return false;
}

/**
 * JSON.parse with co-body's rules: empty text is no body (undefined), malformed text is 400, and a
 * `__proto__` key is 422. The scan for it runs only when the text could hold one (the literal key or
 * a \\u escape), as bourne's does.
 */
function parseJsonText(text: string): unknown {
  if (text === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new InvalidJsonError();
  }
  const suspect = value !== null && typeof value === 'object' && (text.includes('__proto__') || text.includes('\\u')) && SUSPECT_PROTO.test(text);
  if (suspect && hasProtoKey(value as object)) throw protoKeyError();
  return value;
}

/**
 * Reads an uncompressed body as UTF-8 text, the way raw-body does for co-body, without its per-request
 * machinery (decoder, option cloning, five listeners through a generic helper): the schedule call is
 * the hot path and its body is usually one small chunk. A declared or streamed length over
 * `limitBytes` is 413; a body that ends early or is aborted is 400; a leading BOM is dropped.
 */
function readUtf8(req: IncomingMessage, limitBytes: number, declared: number | undefined): Promise<string> {
  return new Promise((resolve, reject) => {
    if (declared !== undefined && declared > limitBytes) {
      req.pause();
      reject(new PayloadTooLargeError(limitBytes));
      return;
    }
    const chunks: Buffer[] = [];
    let received = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onAbort);
      req.off('close', onAbort);
    };
    const fail = (err: unknown) => {
      cleanup();
      req.pause();
      reject(err);
    };
    function onData(chunk: Buffer): void {
      received += chunk.length;
      if (received > limitBytes) fail(new PayloadTooLargeError(limitBytes));
      else chunks.push(chunk);
    }
    function onEnd(): void {
      cleanup();
      if (declared !== undefined && received !== declared) {
        reject(new InvalidJsonError('request body ended before its declared length'));
        return;
      }
      const text = (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received)).toString('utf8');
      resolve(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    }
    function onAbort(): void {
      fail(new InvalidJsonError('request body ended before its declared length'));
    }
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onAbort);
    req.on('close', onAbort);
  });
}

/** co-body / raw-body errors carry a `type`; these are the client's fault and map to the contract's codes. */
function mapBodyError(err: unknown, limitBytes: number): unknown {
  const e = err as { type?: string; status?: number; message?: string };
  switch (e.type) {
    case 'entity.too.large':
      return new PayloadTooLargeError(limitBytes);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new UnsupportedMediaTypeError(e.message);
    case 'request.aborted':
    case 'request.size.invalid':
      return new InvalidJsonError('request body ended before its declared length');
    default:
      break;
  }
  // inflation refuses an unknown Content-Encoding with a bare status 415 and no type.
  if (e.status === 415) return new UnsupportedMediaTypeError(e.message);
  if (e.status === 400 && /prototype/i.test(e.message ?? '')) return protoKeyError();
  if (e.status === 400 || err instanceof SyntaxError) return new InvalidJsonError();
  return err;
}

/**
 * Reads a JSON request body into `ctx.state.body` (undefined when there is none). A non-empty body must
 * be JSON (415 otherwise); malformed JSON is 400, a body over `limitBytes` 413 and nesting deeper than
 * `maxDepth` 422. An uncompressed body (nearly all) is read and parsed here directly; a compressed one
 * goes through koa-bodyparser, whose own errors are off-contract, so each is mapped here.
 */
export function readJsonBody(options: { limitBytes: number; maxDepth: number }): Middleware<ApiState> {
  const parse = bodyParser({
    enableTypes: ['json'],
    jsonLimit: `${options.limitBytes}b`,
    // Event payloads may be any JSON value, not only objects and arrays.
    strict: false,
    extendTypes: { json: JSON_TYPES },
  } as bodyParser.Options & { strict: boolean });
  return async (ctx, next) => {
    const chunked = ctx.get('Transfer-Encoding') !== '';
    const length = ctx.request.length;
    if (!chunked && !(length !== undefined && length > 0)) {
      ctx.state.body = undefined;
      return next();
    }
    if (!ctx.request.is(JSON_TYPES)) throw new UnsupportedMediaTypeError(ctx.get('Content-Type') || undefined);
    // JSON is UTF-8 (RFC 8259); co-body would decode any other declared charset as UTF-8 regardless.
    const charset = CHARSET.exec(ctx.get('Content-Type'))?.[1];
    if (charset && !/^utf-?8$/i.test(charset)) throw new UnsupportedMediaTypeError(ctx.get('Content-Type'));
    const encoding = ctx.get('Content-Encoding');
    let raw: string;
    let body: unknown;
    if (encoding === '' || encoding === 'identity') {
      raw = await readUtf8(ctx.req, options.limitBytes, length);
      body = parseJsonText(raw);
    } else {
      try {
        await parse(ctx, async () => undefined);
      } catch (err) {
        throw mapBodyError(err, options.limitBytes);
      }
      raw = ctx.request.rawBody ?? '';
      body = ctx.request.body;
    }
    if (raw.trim() === '') ctx.state.body = undefined;
    else {
      if (measureJsonDepth(raw, options.maxDepth) > options.maxDepth) {
        throw new InvalidDataError(`request body is nested deeper than ${options.maxDepth} levels`, [
          { path: 'body', message: `must not be nested deeper than ${options.maxDepth} levels` },
        ]);
      }
      // Only a \u escape can smuggle in NUL or a lone surrogate (raw ones are invalid JSON or U+FFFD).
      const bad = raw.includes('\\u') ? findUnstorableText(body) : undefined;
      if (bad !== undefined) {
        throw new InvalidDataError('request body holds text that cannot be stored (a NUL character or an unpaired surrogate)', [
          { path: `body${bad}`, message: 'must not contain U+0000 or unpaired surrogates' },
        ]);
      }
      ctx.state.body = body;
    }
    return next();
  };
}
