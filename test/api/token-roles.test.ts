// Client and worker tokens on every operation of openapi.yaml (and of a fixture with a worker
// protocol): no token, a client, a worker and the metrics token, under each way tokens can be set.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Koa from 'koa';
import Router from '@koa/router';
import '../helpers/spec-matcher';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { createAuthenticators } from '../../src/api/auth';
import { handleErrors } from '../../src/api/error-middleware';
import { assignRequestId } from '../../src/api/request-id';
import { compileSpec, getSpec, WORKER_PROTOCOL_TAG, type CompiledSpec, type SpecOperation } from '../../src/api/spec';
import type { ApiState } from '../../src/api/state';
import { addOperation, type OperationId } from '../../src/api/typed';
import { StepwiseApiError } from '../../src/client';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/logger';

const CLIENT = 'client-token-0123456789';
const WORKER = 'worker-token-0123456789';
const METRICS = 'metrics-token-0123456789';
type Who = 'none' | 'client' | 'worker' | 'metrics';
const WHO: Who[] = ['none', 'client', 'worker', 'metrics'];
const TOKEN_OF: Record<Who, string | undefined> = { none: undefined, client: CLIENT, worker: WORKER, metrics: METRICS };

/** Which kinds of token a server has; a token of a kind it lacks is unknown to it. */
interface Setup {
  name: string;
  client: boolean;
  worker: boolean;
  metrics: boolean;
}
const SETUPS: Setup[] = [
  { name: 'client, worker and metrics tokens', client: true, worker: true, metrics: true },
  { name: 'worker tokens only', client: false, worker: true, metrics: false },
  { name: 'client tokens only', client: true, worker: false, metrics: false },
  { name: 'no token (auth off)', client: false, worker: false, metrics: false },
];

const isWorkerProtocol = (spec: CompiledSpec, op: SpecOperation) => {
  const raw = (spec.document.paths as Record<string, Record<string, { tags?: string[] }>>)[op.path][op.method.toLowerCase()];
  return (raw.tags ?? []).includes(WORKER_PROTOCOL_TAG);
};

/**
 * What the contract promises `who` gets on `op`: through (any answer but 401/403), 401, or 403 with
 * the reason naming the token needed. Written from the rules in openapi.yaml, not from src/api/auth.ts.
 */
function expected(spec: CompiledSpec, op: SpecOperation, who: Who, setup: Setup): 'through' | 401 | { status: 403; reason: string } {
  const known = who !== 'none' && setup[who];
  if (op.securityScheme === undefined) return 'through';
  if (op.securityScheme === 'metricsToken') {
    if (!setup.metrics) return 'through';
    if (!known) return 401;
    return who === 'worker' ? { status: 403, reason: 'metrics_token_required' } : 'through';
  }
  if (!setup.client && !setup.worker) return 'through';
  if (!known) return 401;
  const needs = isWorkerProtocol(spec, op) ? 'worker' : 'client';
  return who === needs ? 'through' : { status: 403, reason: `${needs}_token_required` };
}

/** A request to `op` that its handler never sees: an unknown query parameter fails validation (422), which runs after auth. */
function probePath(op: SpecOperation): string {
  const filled = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => (name === 'id' ? '0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10' : 'probe'));
  return op.strictQuery ? `${filled}?token_probe=1` : filled;
}

function checkAnswer(res: { status: number; body: unknown }, want: ReturnType<typeof expected>, strictQuery: boolean): void {
  if (want === 'through') {
    expect(res.status).toBe(strictQuery ? 422 : 200);
  } else if (want === 401) {
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ error: { code: 'unauthorized' } });
  } else {
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: { code: 'forbidden', reason: want.reason, message: expect.stringMatching(/^this operation needs .+; a (client|worker|metrics) token may not use it$/) } });
  }
}

describe.each(SETUPS)('openapi.yaml with $name', (setup) => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi({
      tokens: setup.client ? [CLIENT] : [],
      workerTokens: setup.worker ? [WORKER] : [],
      metricsToken: setup.metrics ? METRICS : undefined,
    });
  });
  afterAll(async () => {
    await api.close();
  });

  const spec = getSpec();
  test.each([...spec.operations.values()].map((op) => [op.operationId, op] as const))('%s answers each kind of token as the contract says', async (_id, op) => {
    for (const who of WHO) {
      const token = TOKEN_OF[who];
      // Spec-checked like every test call: a 403 must be one the operation lists, with a reason the schema allows.
      const res = await api.call(op.method, probePath(op), { headers: token === undefined ? {} : { Authorization: `Bearer ${token}` } });
      const want = expected(spec, op, who, setup);
      try {
        checkAnswer(res, want, op.strictQuery);
      } catch (err) {
        throw new Error(`${who} token on ${op.method} ${op.path}: ${(err as Error).message}`);
      }
    }
  });
});

describe.each(SETUPS)('a worker protocol (fixture contract) with $name', (setup) => {
  // The fixture's operations mounted as the server mounts openapi.yaml's (addOperation and the
  // server's authenticators), so the worker protocol is covered before openapi.yaml has one.
  const spec = compileSpec(path.join(__dirname, '..', 'fixtures', 'worker-protocol.openapi.yaml'));
  let server: http.Server;
  let url: string;
  beforeAll(async () => {
    const config = loadConfig({ env: {}, overrides: { 'auth.tokens': setup.client ? [CLIENT] : [], 'auth.workerTokens': setup.worker ? [WORKER] : [], 'metrics.token': setup.metrics ? METRICS : undefined } });
    const router = new Router<ApiState>();
    const options = { spec, authenticators: createAuthenticators(config), bodyLimitBytes: 1024, bodyDiscardBytes: 0, jsonMaxDepth: 8 };
    for (const op of spec.operations.values()) addOperation(router, options, op.operationId as OperationId, (async () => ({ status: 200, body: { ok: true } })) as never);
    const app = new Koa<ApiState>();
    app.use(assignRequestId());
    app.use(handleErrors(createLogger({ level: 'silent' })));
    app.use(router.routes());
    server = http.createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  test('it has client, worker protocol, public and metrics operations', () => {
    const ops = [...spec.operations.values()];
    expect(ops.filter((op) => isWorkerProtocol(spec, op)).map((op) => op.operationId)).toEqual(['claimWork', 'listWorkerSteps']);
    expect(ops.map((op) => op.securityScheme)).toEqual(expect.arrayContaining(['bearerAuth', undefined, 'metricsToken']));
  });

  test.each([...spec.operations.values()].map((op) => [op.operationId, op] as const))('%s answers each kind of token as the contract says', async (_id, op) => {
    for (const who of WHO) {
      const token = TOKEN_OF[who];
      const res = await fetch(`${url}${probePath(op)}`, { method: op.method, headers: token === undefined ? {} : { Authorization: `Bearer ${token}` } });
      try {
        checkAnswer({ status: res.status, body: await res.json() }, expected(spec, op, who, setup), op.strictQuery);
      } catch (err) {
        throw new Error(`${who} token on ${op.method} ${op.path}: ${(err as Error).message}`);
      }
    }
  });
});

describe('the typed client', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi({ tokens: [CLIENT], workerTokens: [WORKER] });
  });
  afterAll(async () => {
    await api.close();
  });

  test('passes a client token as before; with a worker token it gets a 403 naming the token needed', async () => {
    expect(await api.clientWith(CLIENT).listTasks()).toEqual([]);
    const refused = await api.clientWith(WORKER).listTasks().catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(StepwiseApiError);
    expect(refused).toMatchObject({ status: 403, code: 'forbidden', facts: { reason: 'client_token_required' } });
    expect(await api.clientWith(undefined).listTasks().catch((err: unknown) => err)).toMatchObject({ status: 401, code: 'unauthorized' });
  });

  test('start-up logs count each kind of token and never print one', () => {
    expect(api.logs.text).toContain('"auth":"on","clientTokens":1,"workerTokens":1');
    for (const secret of [CLIENT, WORKER]) expect(api.logs.text).not.toContain(secret);
  });
});

test('with worker tokens alone, the server warns at start-up that every client operation is refused', async () => {
  const api = await startTestApi({ workerTokens: [WORKER] });
  try {
    expect(api.logs.text).toContain('no client tokens configured');
    expect(api.logs.text).not.toContain('authentication is off');
  } finally {
    await api.close();
  }
});
