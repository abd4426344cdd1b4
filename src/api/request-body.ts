import { isUtf8 } from 'node:buffer';
import bodyParser from 'koa-bodyparser';
import type { Middleware } from 'koa';
import { InvalidDataError, InvalidJsonError, PayloadTooLargeError, UnsupportedMediaTypeError } from '../errors';
import type { ApiState } from './state';
import { findUnstorableText } from '../domain/storable-text';
import { findNonFiniteNumber } from '../domain/json';
import { discardRequestBody, lingerOnClose } from './oversize-body';

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
  // zlib's errors (Z_DATA_ERROR, Z_BUF_ERROR) and brotli's (ERR__ERROR_FORMAT_…): the body does not
  // decode as its Content-Encoding says.
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string' && /^(Z_|ERR__ERROR_)/.test(code)) {
    return new InvalidJsonError('request body does not decode as its Content-Encoding says');
  }
  // inflation refuses an unknown Content-Encoding with a bare status 415 and no type.
  if (e.status === 415) return new UnsupportedMediaTypeError(e.message);
  if (e.status === 400 && /prototype/i.test(e.message ?? '')) {
    // Valid JSON, but a `__proto__` key is refused rather than silently dropped.
    return new InvalidDataError('request body must not contain a "__proto__" key', [{ path: 'body', message: 'must not contain "__proto__"' }]);
  }
  if (e.status === 400 || err instanceof SyntaxError) return new InvalidJsonError();
  return err;
}

/**
 * Reads a JSON request body into `ctx.state.body` (undefined when there is none). A non-empty body must
 * be JSON (415 otherwise); malformed JSON is 400, a body over `limitBytes` 413 and nesting deeper than
 * `maxDepth` 422. koa-bodyparser's own errors are off-contract, so each is mapped here. A body left
 * half read is discarded up to `discardBytes` before the answer, so that a client still writing it
 * can read the answer; past that, the connection closes after the answer.
 */
export function readJsonBody(options: { limitBytes: number; maxDepth: number; discardBytes: number }): Middleware<ApiState> {
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
    // The bytes as sent, kept by reference (raw-body holds them too) to tell a U+FFFD the client wrote
    // from one the decoder put for bytes that are not UTF-8. A compressed body's bytes are not its text.
    const identity = (ctx.get('Content-Encoding') || 'identity').toLowerCase() === 'identity';
    const sent: Buffer[] = [];
    const keep = (chunk: Buffer) => sent.push(chunk);
    if (identity) ctx.req.on('data', keep);
    try {
      await parse(ctx, async () => undefined);
    } catch (err) {
      ctx.req.off('data', keep); // before any discard below, which must hold nothing
      // A body left half read (too large, or its decoder failed mid-stream) would stall the next
      // request on this keep-alive connection; read to its end, the connection can be kept.
      if (!ctx.req.complete || !ctx.req.readableEnded) {
        const outcome = await discardRequestBody(ctx.req, options.discardBytes);
        if (outcome !== 'read') {
          ctx.set('Connection', 'close');
          if (outcome === 'bounded') lingerOnClose(ctx.req.socket);
        }
      }
      throw mapBodyError(err, options.limitBytes);
    } finally {
      ctx.req.off('data', keep);
    }
    const raw = ctx.request.rawBody ?? '';
    if (identity && raw.includes('\uFFFD') && !isUtf8(Buffer.concat(sent))) throw new InvalidJsonError('request body is not valid UTF-8');
    if (raw.trim() === '') ctx.state.body = undefined;
    else {
      if (measureJsonDepth(raw, options.maxDepth) > options.maxDepth) {
        throw new InvalidDataError(`request body is nested deeper than ${options.maxDepth} levels`, [
          { path: 'body', message: `must not be nested deeper than ${options.maxDepth} levels` },
        ]);
      }
      // Only a \u escape can smuggle in NUL or a lone surrogate (raw ones are invalid JSON or U+FFFD).
      const bad = raw.includes('\\u') ? findUnstorableText(ctx.request.body) : undefined;
      if (bad !== undefined) {
        throw new InvalidDataError('request body holds text that cannot be stored (a NUL character or an unpaired surrogate)', [
          { path: `body${bad}`, message: 'must not contain U+0000 or unpaired surrogates' },
        ]);
      }
      // Only a literal with a long exponent or mantissa overflows a double (1e400, 400 digits).
      const overflow = /[eE]\+?\d{3}|\d{300}/.test(raw) ? findNonFiniteNumber(ctx.request.body) : undefined;
      if (overflow !== undefined) {
        throw new InvalidDataError('request body holds a number too large to store (it would become null)', [
          { path: `body${overflow}`, message: 'must be a finite number within the range of a 64-bit float' },
        ]);
      }
      ctx.state.body = ctx.request.body;
    }
    return next();
  };
}
