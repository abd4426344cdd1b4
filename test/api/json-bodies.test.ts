// A body that cannot be written as JSON (on a real history: a string past V8's length limit) failed
// in Koa's response step, after every middleware: Koa answered a plain-text 500 and the access log
// had already recorded 200. The body is now written inside the error middleware (src/api/json-body.ts).
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import Koa from 'koa';
import { handleErrors } from '../../src/api/error-middleware';
import { serializeJsonBodies } from '../../src/api/json-body';
import { observeRequests, type ObservedRequest } from '../../src/api/request-observers';
import { assignRequestId } from '../../src/api/request-id';
import type { ApiState } from '../../src/api/state';
import { createLogger } from '../../src/logger';

const log = createLogger({ level: 'silent', pretty: false });
const observed: ObservedRequest[] = [];
let server: Server;
let url: string;

beforeAll(async () => {
  const app = new Koa<ApiState>();
  app.silent = true;
  // In the order of createApiApp (src/api/app.ts).
  app.use(assignRequestId());
  app.use(observeRequests([(request) => observed.push(request)]));
  app.use(handleErrors(log));
  app.use(serializeJsonBodies());
  app.use((ctx) => {
    if (ctx.path === '/cycle') {
      const body: Record<string, unknown> = { items: [] };
      body.self = body;
      ctx.status = 200;
      ctx.body = body;
    } else {
      ctx.status = 200;
      ctx.body = { items: [1, 2], next_after_seq: null };
    }
  });
  server = app.listen(0);
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

test('a body that cannot be written as JSON answers the envelope, and the observers see the 500 sent', async () => {
  const res = await fetch(`${url}/cycle`);
  expect(res.status).toBe(500);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(await res.json()).toEqual({ error: { code: 'internal_error', message: 'an internal error occurred' } });
  expect(observed.find((o) => o.requestId === res.headers.get('x-request-id'))).toMatchObject({ status: 500 });
});

test('a body that can is written as Koa would: JSON, its type and length', async () => {
  const res = await fetch(`${url}/page`);
  const text = await res.text();
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
  expect(res.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
  expect(JSON.parse(text)).toEqual({ items: [1, 2], next_after_seq: null });
  const head = await fetch(`${url}/page`, { method: 'HEAD' });
  expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
});
