// A body over the limit answers 413 payload_too_large to every client, however it sends the body:
// the server reads and discards the rest (up to http.bodyDiscardBytes) before answering.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { StepwiseApiError } from '../../src/client';

const MiB = 1024 * 1024;
const SIZES: Array<[string, number]> = [
  ['1.5 MiB', 1.5 * MiB],
  ['8 MiB', 8 * MiB],
];
/** Sizes within the default discard bound (32 MiB past the limit). */
const RAW_SIZES: Array<[string, number]> = [...SIZES, ['20 MiB', 20 * MiB]];

/** A schedule request whose JSON text is `bytes` long. */
function scheduleText(task: string, bytes: number): string {
  const empty = JSON.stringify({ task, data: { s: '' } });
  return JSON.stringify({ task, data: { s: 'x'.repeat(bytes - empty.length) } });
}

interface RawAnswer {
  status?: number;
  headers?: http.IncomingHttpHeaders;
  body?: unknown;
  /** The request's error, if the connection failed (before or after the answer). */
  error?: NodeJS.ErrnoException;
  /** Whether the whole body was handed to the connection. */
  writeFinished?: boolean;
}

/**
 * POSTs with http.request: `body` as one buffer (with Content-Length), or `chunks` chunks of `chunk`
 * written as the socket drains (chunked, no length). Settles once the answer is read and the request
 * is done with (written whole, or failed), so a write cut by the server shows as `error`.
 */
function postRaw(url: string, body: { buffer: Buffer } | { chunk: Buffer; chunks: number }): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const answer: RawAnswer = {};
    let answered = false;
    let written = false;
    const settle = () => {
      if ((answered && written) || (answer.error && !answered && answer.status === undefined)) resolve(answer);
    };
    const req = http.request(url, { method: 'POST', headers: { 'Content-Type': 'application/json' } }, (res) => {
      answer.status = res.statusCode;
      answer.headers = res.headers;
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => {
        answer.body = JSON.parse(Buffer.concat(parts).toString('utf8'));
        answered = true;
        settle();
      });
    });
    req.on('error', (err) => {
      answer.error = err;
      written = true;
      settle();
    });
    req.on('finish', () => {
      answer.writeFinished = true;
      written = true;
      settle();
    });
    // The client closed the connection itself (the answer said close) before writing it all.
    req.on('close', () => {
      written = true;
      settle();
    });
    if ('buffer' in body) {
      req.end(body.buffer);
      return;
    }
    let sent = 0;
    const write = () => {
      while (sent < body.chunks) {
        sent++;
        if (!req.write(body.chunk)) {
          req.once('drain', write);
          return;
        }
      }
      req.end();
    };
    req.on('socket', () => write());
  });
}

/** A body of `bytes` as a stream, in `chunk`-sized pieces, for fetch (duplex, no length). */
function streamOf(chunk: Uint8Array, chunks: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent++ < chunks) controller.enqueue(chunk);
      else controller.close();
    },
  });
}

const execFileAsync = promisify(execFile);

/** POSTs the file at `path` with curl; its status and parsed body. */
async function curlPost(url: string, path: string): Promise<{ status: number; body: unknown }> {
  const { stdout } = await execFileAsync('curl', ['-sS', '-X', 'POST', '-H', 'Content-Type: application/json', '--data-binary', `@${path}`, '-w', '\n%{http_code}', url], {
    maxBuffer: 16 * MiB,
  });
  const cut = stdout.lastIndexOf('\n');
  return { status: Number(stdout.slice(cut + 1)), body: JSON.parse(stdout.slice(0, cut)) };
}

const ENVELOPE = { error: { code: 'payload_too_large', message: 'request body exceeds the limit of 1048576 bytes' } };

describe('a body over the limit', () => {
  let api: TestApi;
  let task: string;
  let dir: string;
  beforeAll(async () => {
    api = await startTestApi();
    task = uniqueTask();
    await registerTask(api.db, task);
    dir = mkdtempSync(join(tmpdir(), 'stepwise-oversize-'));
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await api.close();
  });
  const executionsUrl = () => `${api.api.url}/api/v1/executions`;

  /** The server still answers, on a new connection and through the typed client. */
  async function expectHealthy(): Promise<void> {
    expect((await api.call('GET', '/healthz')).status).toBe(200);
    expect((await api.client.schedule(task, { small: true })).created).toBe(true);
  }

  test.each(SIZES)('of %s is 413 payload_too_large to the typed client (fetch)', async (_name, bytes) => {
    const err = await api.client.schedule(task, { s: 'x'.repeat(bytes) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StepwiseApiError);
    expect(err).toMatchObject({ status: 413, code: 'payload_too_large' });
    await expectHealthy();
  });

  test.each(SIZES)('of %s is 413 payload_too_large to fetch with a streamed body (no length)', async (_name, bytes) => {
    const chunk = new Uint8Array(64 * 1024).fill(0x20);
    const res = await api.fetch(
      new Request(executionsUrl(), {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: streamOf(chunk, bytes / chunk.length),
        duplex: 'half',
      } as RequestInit & { duplex: 'half' }),
    );
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual(ENVELOPE);
    await expectHealthy();
  });

  test.each(RAW_SIZES)('of %s is 413 payload_too_large to http.request, whose write completes, and the connection is kept', async (_name, bytes) => {
    const res = await postRaw(executionsUrl(), { buffer: Buffer.from(scheduleText(task, bytes)) });
    expect(res.error).toBeUndefined();
    expect(res.writeFinished).toBe(true);
    expect(res.status).toBe(413);
    expect(res.body).toEqual(ENVELOPE);
    // Read to its end, the body leaves the connection usable.
    expect(res.headers?.connection).not.toBe('close');
    await expectHealthy();
  });

  test.each(RAW_SIZES)('of %s sent chunked (no length) is 413 payload_too_large to http.request, whose write completes', async (_name, bytes) => {
    const res = await postRaw(executionsUrl(), { chunk: Buffer.alloc(64 * 1024, 0x20), chunks: bytes / (64 * 1024) });
    expect(res.error).toBeUndefined();
    expect(res.writeFinished).toBe(true);
    expect(res.status).toBe(413);
    expect(res.body).toEqual(ENVELOPE);
    await expectHealthy();
  });

  test.each(SIZES)('of %s is 413 payload_too_large to curl', async (name, bytes) => {
    const path = join(dir, `${name}.json`);
    writeFileSync(path, scheduleText(task, bytes));
    const res = await curlPost(executionsUrl(), path);
    expect(res).toEqual({ status: 413, body: ENVELOPE });
    await expectHealthy();
  });

  test('of 20 MiB once inflated (gzip) is 413 payload_too_large, and the connection is kept', async () => {
    const gz = gzipSync(Buffer.from(scheduleText(task, 20 * MiB)));
    const res = await new Promise<RawAnswer>((resolve, reject) => {
      const req = http.request(executionsUrl(), { method: 'POST', headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' } }, (r) => {
        const parts: Buffer[] = [];
        r.on('data', (d: Buffer) => parts.push(d));
        r.on('end', () => resolve({ status: r.statusCode, headers: r.headers, body: JSON.parse(Buffer.concat(parts).toString('utf8')) }));
      });
      req.on('error', reject);
      req.end(gz);
    });
    expect(res.status).toBe(413);
    expect(res.body).toEqual(ENVELOPE);
    expect(res.headers?.connection).not.toBe('close');
    await expectHealthy();
  });

  test('of 20 MiB (within the discard bound) is 413 payload_too_large to the typed client', async () => {
    const err = await api.client.schedule(task, { s: 'x'.repeat(20 * MiB) }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 413, code: 'payload_too_large' });
    await expectHealthy();
  });

  test('of 200 MiB streamed past the discard bound gets the 413 with Connection: close, and the client closes the connection (http.request)', async () => {
    const res = await postRaw(executionsUrl(), { chunk: Buffer.alloc(MiB, 0x20), chunks: 200 });
    // Told the connection closes, the client drops it after the answer (its write stops there); had it
    // kept writing, the server would have discarded for a grace period, then reset it.
    if (res.error) expect(res.error.code).toMatch(/^(EPIPE|ECONNRESET)$/);
    expect(res.status).toBe(413);
    expect(res.headers?.connection).toBe('close');
    expect(res.body).toEqual(ENVELOPE);
    await expectHealthy();
  });

  test('sent past the discard bound by a client that goes on writing: it reads the 413, and is not reset while the connection lingers', async () => {
    const { port } = new URL(api.api.url);
    // Half-open: the client reads the server's FIN but keeps its own side open and writing.
    const socket = net.connect({ port: Number(port), host: '127.0.0.1', allowHalfOpen: true });
    const received: Buffer[] = [];
    socket.on('data', (d: Buffer) => received.push(d));
    let failure: string | undefined;
    socket.on('error', (err: NodeJS.ErrnoException) => (failure ??= err.code));
    const chunk = Buffer.alloc(MiB, 0x20);
    const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
    let ended = false;
    const serverEnded = new Promise<void>((resolve) => socket.on('end', () => resolve()));
    void serverEnded.then(() => (ended = true));
    let sent = 0;
    const write = () => {
      // Until the answer and the server's FIN: far past the bound, never past 4 GiB.
      while (!ended && !socket.destroyed && sent < 4096) {
        sent++;
        if (!socket.write(frame)) {
          socket.once('drain', write);
          return;
        }
      }
    };
    socket.on('connect', () => {
      socket.write('POST /api/v1/executions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
      write();
    });
    await serverEnded;
    const text = Buffer.concat(received).toString('utf8');
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    expect(text).toMatch(/\r\nconnection: close\r\n/i);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual(ENVELOPE);
    // After the answer the server still reads what the client writes (8 MiB more) instead of resetting.
    for (let i = 0; i < 8; i++) {
      await new Promise<void>((resolve) => socket.write(frame, () => resolve()));
    }
    expect(failure).toBeUndefined();
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.end('0\r\n\r\n');
    await closed;
    await expectHealthy();
  });

  test('of 200 MiB streamed past the discard bound gets the 413 to fetch', async () => {
    const chunk = new Uint8Array(MiB).fill(0x20);
    const res = await api.fetch(
      new Request(executionsUrl(), {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: streamOf(chunk, 200),
        duplex: 'half',
      } as RequestInit & { duplex: 'half' }),
    );
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual(ENVELOPE);
    await expectHealthy();
  });
});

describe('a discarded body', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi({ http: { bodyDiscardBytes: 256 * MiB } });
  });
  afterAll(async () => {
    await api.close();
  });

  test('of 200 MiB streamed is read to its end without being held in memory, then answered 413', async () => {
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 20);
    try {
      const res = await postRaw(`${api.api.url}/api/v1/executions`, { chunk: Buffer.alloc(256 * 1024, 0x20), chunks: 800 });
      expect(res.error).toBeUndefined();
      expect(res.status).toBe(413);
      expect(res.headers?.connection).not.toBe('close');
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, process.memoryUsage().rss);
    expect(peak - before).toBeLessThan(64 * MiB);
    expect((await api.call('GET', '/healthz')).status).toBe(200);
  });
});
