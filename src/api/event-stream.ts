import { PassThrough } from 'node:stream';
import type { ApiContext } from './state';

/** The reconnection delay (ms) streams suggest to clients with `retry:`. */
export const RECONNECT_DELAY_MS = 1000;

/**
 * One Server-Sent Events response: the body Koa pipes to the client, the `retry:` line first, events,
 * and a keep-alive comment every `keepAliveMs`, so clients and proxies can tell a quiet stream from a
 * dead one. `onClose` runs once, whether the client went away, the server ended the stream, or the
 * connection broke.
 */
export class EventStream {
  /** Hand it to Koa as the response body. */
  readonly body = new PassThrough();
  private readonly keepAlive: NodeJS.Timeout;
  private closed = false;

  constructor(
    ctx: ApiContext,
    keepAliveMs: number,
    private readonly onClose: () => void,
  ) {
    // Small writes must leave at once, not wait for more (Nagle); proxies must not buffer them; TCP
    // keep-alive probes find a peer that vanished without closing.
    ctx.req.socket.setNoDelay(true);
    ctx.req.socket.setKeepAlive(true);
    ctx.set('X-Accel-Buffering', 'no');
    this.keepAlive = setInterval(() => this.write(': keep-alive\n\n'), keepAliveMs);
    this.keepAlive.unref();
    ctx.res.once('close', () => this.close());
    this.body.once('close', () => this.close());
    this.write(`retry: ${RECONNECT_DELAY_MS}\n\n`);
  }

  /** True once the stream has ended or the client has gone. */
  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * True while the client reads slower than events come: what was written is still buffered. The
   * caller then holds back and writes the latest state once `onDrain` fires, instead of queueing
   * every state in between in memory.
   */
  get isBehind(): boolean {
    return this.body.writableNeedDrain;
  }

  /** Calls `fn` once the buffered events have gone out. */
  onDrain(fn: () => void): void {
    this.body.once('drain', fn);
  }

  /** Sends one event; `data` must be one line (JSON.stringify writes no line breaks). */
  send(event: string, data: string, id?: string): void {
    this.write(`${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${data}\n\n`);
  }

  /** Sends an event already written as SSE bytes (one frame shared by many streams, never copied). */
  sendFrame(frame: Buffer): void {
    if (!this.closed) this.body.write(frame);
  }

  /** Ends the response after what was written; the client sees the stream close. */
  end(): void {
    if (this.closed) return;
    this.body.end();
    this.close();
  }

  private write(text: string): void {
    if (!this.closed) this.body.write(text);
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.keepAlive);
    this.onClose();
  }
}
