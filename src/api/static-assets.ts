import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { Context } from 'koa';

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

/** Files from here up are compressed at brotli quality 9: 11 takes seconds on the 1.7 MB Swagger UI bundle. */
const LARGE_BYTES = 256 * 1024;

/** A file served from memory, with a strong ETag and brotli/gzip variants computed once, on first use. */
export interface StaticAsset {
  readonly body: Buffer;
  readonly contentType: string;
  readonly cacheControl: string;
  /** A strong ETag: the SHA-256 of the body (the same for every encoding; Vary says which one was sent). */
  readonly etag: string;
  /** The first 10 hex digits of the SHA-256, for content-addressed file names. */
  readonly hash: string;
  readonly headers: Readonly<Record<string, string>>;
  encoded: Partial<Record<'br' | 'gzip', Promise<Buffer>>>;
}

export function createStaticAsset(
  body: string | Buffer,
  contentType: string,
  cacheControl: string,
  headers: Record<string, string> = {},
): StaticAsset {
  const buffer = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const digest = createHash('sha256').update(buffer).digest('hex');
  return { body: buffer, contentType, cacheControl, etag: `"${digest.slice(0, 32)}"`, hash: digest.slice(0, 10), headers, encoded: {} };
}

function encode(asset: StaticAsset, encoding: 'br' | 'gzip'): Promise<Buffer> {
  let pending = asset.encoded[encoding];
  if (!pending) {
    pending =
      encoding === 'br'
        ? brotli(asset.body, {
            params: {
              [zlib.constants.BROTLI_PARAM_QUALITY]: asset.body.length >= LARGE_BYTES ? 9 : 11,
              [zlib.constants.BROTLI_PARAM_SIZE_HINT]: asset.body.length,
            },
          })
        : gzip(asset.body, { level: 9 });
    asset.encoded[encoding] = pending;
  }
  return pending;
}

/**
 * Answers with `asset`: 304 when the client's If-None-Match still holds, else the smallest encoding
 * the client accepts. Text assets this small are cheaper to compress once than on every request.
 */
export async function sendStaticAsset(ctx: Context, asset: StaticAsset): Promise<void> {
  ctx.status = 200;
  ctx.set('ETag', asset.etag);
  ctx.set('Cache-Control', asset.cacheControl);
  ctx.set('Vary', 'Accept-Encoding');
  ctx.set('X-Content-Type-Options', 'nosniff');
  for (const [name, value] of Object.entries(asset.headers)) ctx.set(name, value);
  if (ctx.fresh) {
    ctx.status = 304;
    return;
  }
  ctx.type = asset.contentType;
  const encoding = asset.body.length < 1024 ? 'identity' : ctx.acceptsEncodings('br', 'gzip', 'identity');
  if (encoding === 'br' || encoding === 'gzip') {
    ctx.set('Content-Encoding', encoding);
    ctx.body = await encode(asset, encoding);
  } else {
    ctx.body = asset.body;
  }
}
