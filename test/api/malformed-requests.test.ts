// Requests Node's HTTP parser refuses before Koa sees them still get the error envelope, a request id
// and the headers every answer carries; the connection then closes.
import net from 'node:net';
import { startTestApi, type TestApi } from '../helpers/api-server';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi({ http: { headersTimeoutMs: 1000, requestTimeoutMs: 1000 } });
});
afterAll(async () => {
  await api.close();
});

/** Writes raw bytes to the server and reads everything it answers until it closes the connection. */
function raw(bytes: string): Promise<{ status: number; headers: Map<string, string>; body: unknown }> {
  const { port, hostname } = new URL(api.api.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(bytes));
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (text += d));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head, body] = [text.slice(0, text.indexOf('\r\n\r\n')), text.slice(text.indexOf('\r\n\r\n') + 4)];
      const [statusLine, ...lines] = head.split('\r\n');
      const headers = new Map(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as [string, string]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) });
    });
  });
}

test.each([
  ['a header line without a colon', 'GET /healthz HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n', 400, 'malformed_request'],
  ['a Content-Length that is not a number', 'POST /api/v1/executions HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n', 400, 'malformed_request'],
  ['two different Content-Lengths', 'POST /api/v1/executions HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab', 400, 'malformed_request'],
  ['a method with spaces in it', 'GE T / HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'malformed_request'],
  ['headers over 16 KiB', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'request_header_too_large'],
])('%s: the envelope with its status and code, a request id, and the connection closes', async (_what, bytes, status, code) => {
  const res = await raw(bytes);
  expect(res.status).toBe(status);
  expect(res.body).toEqual({ error: { code, message: expect.any(String) } });
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
  expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  expect(res.headers.get('connection')).toBe('close');
});

test('headers that never end are 408 request_timeout in the envelope', async () => {
  const res = await raw('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n');
  expect(res.status).toBe(408);
  expect(res.body).toEqual({ error: { code: 'request_timeout', message: expect.any(String) } });
  expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
});
