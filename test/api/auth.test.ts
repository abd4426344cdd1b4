// Bearer-token authentication: every /api/v1 operation of the contract, and tokens never in logs.
import { randomBytes } from 'node:crypto';
import '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { createExecutionIn } from '../helpers/simulated-worker';
import { isTokenAccepted } from '../../src/api/auth';
import { getSpec, type SpecOperation } from '../../src/api/spec';
import { createHash } from 'node:crypto';

const TOKEN = `tok_${randomBytes(16).toString('hex')}`;
const SECOND = `tok2_${randomBytes(16).toString('hex')}`;
let api: TestApi;
let executionId: string;

beforeAll(async () => {
  api = await startTestApi({ tokens: [TOKEN, SECOND], logLevel: 'trace' });
  executionId = (await createExecutionIn(api.clientWith(TOKEN), api.db, 'waiting')).id;
});
afterAll(async () => {
  await api.close();
});

const protectedOps = () => [...getSpec().operations.values()].filter((op) => op.requiresAuth);

/** A request for `op` that would succeed with a token. */
function requestFor(op: SpecOperation): { path: string; body?: string; headers: Record<string, string> } {
  const path = op.path.replace('{id}', executionId).replace('{event_name}', 'approval');
  if (op.method !== 'POST') return { path: op.path.includes('/wait') ? `${path}?timeout=0` : path, headers: {} };
  return { path, body: op.operationId === 'scheduleExecution' ? '{"task":"t"}' : '{}', headers: { 'Content-Type': 'application/json' } };
}

describe('authentication', () => {
  test('every /api/v1 operation of openapi.yaml except the contract itself requires a token', () => {
    const ops = [...getSpec().operations.values()];
    const api1 = ops.filter((op) => op.path.startsWith('/api/v1/'));
    expect(api1.filter((op) => !op.requiresAuth).map((op) => op.operationId)).toEqual(['getOpenApiSpec']);
    expect(protectedOps().length).toBeGreaterThanOrEqual(8);
  });

  test.each(protectedOps().map((op) => [op.operationId, op] as const))(
    '%s answers 401 unauthorized with WWW-Authenticate: Bearer without a valid token',
    async (_id, op) => {
      const req = requestFor(op);
      const attempts: Array<Record<string, string>> = [
        {},
        { Authorization: '' },
        { Authorization: 'Bearer' },
        { Authorization: `Bearer ${TOKEN}x` },
        { Authorization: `Bearer ${TOKEN.slice(0, -1)}` },
        { Authorization: `Basic ${Buffer.from(`user:${TOKEN}`).toString('base64')}` },
        { Authorization: `Token ${TOKEN}` },
        { Authorization: `Bearer ${TOKEN} ${TOKEN}` },
      ];
      for (const auth of attempts) {
        const res = await api.call(op.method, req.path, { headers: { ...req.headers, ...auth }, body: req.body });
        expect(res.status).toBe(401);
        expect(res.body).toMatchObject({ error: { code: 'unauthorized' } });
        expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
      }
      for (const token of [TOKEN, SECOND]) {
        const headers = { ...req.headers, Authorization: `bearer ${token}` };
        if (op.path.endsWith('/stream') || op.path.endsWith('/changes')) {
          // An event stream stays open: its status is all there is to check, then hang up.
          const res = await fetch(`${api.api.url}${req.path}`, { headers });
          expect(res.status).toBe(200);
          await res.body?.cancel();
          continue;
        }
        const res = await api.call(op.method, req.path, { headers, body: req.body });
        expect(res.status).not.toBe(401);
      }
    },
  );

  test('variants of a protected path (case, slashes, percent-encoding) never answer without a token', async () => {
    const variants = ['/API/V1/TASKS', '/Api/v1/tasks', '/api/v1/tasks/', '/api/v1//tasks', '//api/v1/tasks', '/api/v1/t%61sks', '/api/v1/tasks%2F', `/api/v1/executions/${executionId.toUpperCase()}`, '/api/v1/executions/'];
    for (const path of variants) {
      const res = await api.call('GET', path);
      expect([401, 404]).toContain(res.status);
    }
    // Matching is exact, so the case variant is simply not a route.
    expect((await api.call('GET', '/API/V1/TASKS', { headers: { Authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
  });

  test('health, readiness, metrics and the contract stay public', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/api/v1/openapi.yaml']) {
      expect((await api.call('GET', path)).status).toBe(200);
    }
  });

  test('tokens never appear in the log, whether accepted or refused', async () => {
    const client = api.clientWith(TOKEN);
    await client.get(executionId);
    await client.listTasks();
    await api.clientWith(SECOND).list();
    await api.call('GET', '/api/v1/tasks', { headers: { Authorization: `Bearer ${TOKEN}-wrong` } });
    await api.call('GET', '/api/v1/nope', { headers: { Authorization: `Bearer ${TOKEN}` } });
    await api.call('POST', '/api/v1/executions', { headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' }, body: '{bad' });
    expect(api.logs.lines.length).toBeGreaterThan(5); // the log did capture these requests
    expect(api.logs.text).toContain('api server listening');
    for (const secret of [TOKEN, SECOND, TOKEN.slice(4)]) expect(api.logs.text).not.toContain(secret);
  });

  test('start-up logs say whether auth is on, and with no token configured auth is off', async () => {
    expect(api.logs.lines.some((l) => l.includes('"auth":"on"'))).toBe(true);
    const open = await startTestApi();
    try {
      expect(open.logs.text).toContain('authentication is off');
      expect((await open.call('GET', '/api/v1/tasks')).status).toBe(200);
    } finally {
      await open.close();
    }
  });

  test('token comparison accepts exactly the configured tokens, whatever the length of the guess', () => {
    const digests = ['alpha', 'beta-token'].map((t) => createHash('sha256').update(t).digest());
    expect(isTokenAccepted(digests, 'alpha')).toBe(true);
    expect(isTokenAccepted(digests, 'beta-token')).toBe(true);
    for (const guess of ['', 'alph', 'alphaa', 'ALPHA', 'beta', 'x'.repeat(10000)]) expect(isTokenAccepted(digests, guess)).toBe(false);
  });
});
