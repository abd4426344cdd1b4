import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/** How a discarded request body ended: read to its end, cut at the bound, or the client went away. */
export type DiscardOutcome = 'read' | 'bounded' | 'gone';

/**
 * How long a connection closed past the discard bound keeps reading before it is destroyed: long
 * enough for a client still writing to read the answer over a slow link, short enough that a client
 * that never stops costs the server little.
 */
export const LINGER_MS = 2000;

/**
 * Reads the rest of a request body that will not be used (too large, or its decoding failed) and
 * throws it away, chunk by chunk, never holding it. A client such as Node's fetch writes its whole
 * body before it reads the answer; a server that answered and closed while it still wrote reset the
 * connection under it, and the client saw a network error instead of the 413. Resolves 'read' at the
 * body's end (the connection can then be kept), 'bounded' once more than `boundBytes` were discarded
 * (reading goes on, for lingerOnClose), or 'gone' when the client hung up.
 */
export function discardRequestBody(req: IncomingMessage, boundBytes: number): Promise<DiscardOutcome> {
  if (req.readableEnded) return Promise.resolve('read');
  if (req.destroyed) return Promise.resolve('gone');
  return new Promise((resolve) => {
    let discarded = 0;
    const settle = (outcome: DiscardOutcome) => {
      req.off('end', onEnd);
      req.off('close', onClose);
      if (outcome !== 'bounded') req.off('data', onData);
      resolve(outcome);
    };
    const onData = (chunk: Buffer) => {
      discarded += chunk.length;
      if (discarded > boundBytes) settle('bounded');
    };
    const onEnd = () => settle('read');
    const onClose = () => settle(req.complete ? 'read' : 'gone');
    // A body parser that gave up left the request paused and, for an encoded body, piped into its decoder.
    req.unpipe();
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('close', onClose);
    req.resume();
  });
}

/**
 * Makes this connection's close a lingering one. Node's server destroys a `Connection: close` socket
 * as soon as the answer is flushed (socket.destroySoon); a socket destroyed while the client still
 * writes answers its next bytes with a reset, which can drop the answer before the client read it.
 * Instead the server half-closes (FIN after the answer), goes on reading and discarding (the request
 * stays flowing), and destroys the socket when the client closes its side or after `graceMs`.
 */
export function lingerOnClose(socket: Socket, graceMs = LINGER_MS): void {
  socket.destroySoon = function lingeringClose(this: Socket) {
    if (this.destroyed) return;
    const timer = setTimeout(() => this.destroy(), graceMs);
    timer.unref();
    this.once('close', () => clearTimeout(timer));
    this.once('end', () => this.destroy());
    this.end();
    this.resume();
  };
}
