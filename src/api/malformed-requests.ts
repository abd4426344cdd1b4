import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorCode } from '../errors';
import type { Logger } from '../logger';

/** Node's parser errors and the answers they get: status, code, message. */
function answerOf(code: string | undefined): [number, ErrorCode, string] {
  if (code === 'HPE_HEADER_OVERFLOW') return [431, 'request_header_too_large', 'the request headers are too large'];
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, 'request_timeout', 'the request did not arrive in time'];
  return [400, 'malformed_request', 'the request is not valid HTTP/1.1'];
}

/**
 * Answers a request Node's HTTP parser refused (bad framing, an invalid header, headers too large, a
 * request too slow) before Koa sees it, with the error envelope, an X-Request-Id and the headers every
 * answer carries, instead of Node's bare status line. The connection closes after: its framing
 * cannot be trusted. For `server.on('clientError')`.
 */
export function answerMalformedRequests(log: Logger): (err: NodeJS.ErrnoException, socket: Duplex) => void {
  return (err, socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, code, message] = answerOf(err.code);
    const requestId = randomUUID();
    const body = JSON.stringify({ error: { code, message } });
    log.info({ requestId, status, code, parserError: err.code }, 'malformed request refused');
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\n` +
        'Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n' +
        body,
    );
  };
}
