// Which token opens which operation: roles read from the contract's tags, and the verdict per gate.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { createGates, createTokenKindReader, decideAccess, type TokenKind } from '../../src/api/auth';
import { compileSpec, getSpec, WORKER_PROTOCOL_TAG } from '../../src/api/spec';
import { loadConfig } from '../../src/config';

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'worker-protocol.openapi.yaml');

function configWith(tokens: { client?: string[]; worker?: string[]; metrics?: string }) {
  return loadConfig({ env: {}, overrides: { 'auth.tokens': tokens.client ?? [], 'auth.workerTokens': tokens.worker ?? [], 'metrics.token': tokens.metrics } });
}

describe('roles of operations', () => {
  test('an operation tagged Worker protocol takes a worker token; every other one a client token', () => {
    const roles = Object.fromEntries([...compileSpec(FIXTURE).operations.values()].map((op) => [op.operationId, [op.securityScheme, op.role]]));
    expect(roles).toEqual({
      listThings: ['bearerAuth', 'client'],
      claimWork: ['bearerAuth', 'worker'],
      listWorkerSteps: ['bearerAuth', 'worker'],
      getHealth: [undefined, 'client'],
      getMetrics: ['metricsToken', 'client'],
    });
  });

  test('in openapi.yaml, exactly the operations tagged Worker protocol take worker tokens, and all sit under /api/v1/worker/', () => {
    const doc = getSpec().document as { paths: Record<string, Record<string, { tags?: string[] }>> };
    for (const op of getSpec().operations.values()) {
      const tagged = (doc.paths[op.path][op.method.toLowerCase()].tags ?? []).includes(WORKER_PROTOCOL_TAG);
      expect([op.operationId, op.role]).toEqual([op.operationId, tagged ? 'worker' : 'client']);
      if (tagged) expect(op.path).toMatch(/^\/api\/v1\/worker\//);
    }
  });

  test('a Worker protocol operation without bearerAuth is refused when the contract is compiled', () => {
    const doc = parseYaml(readFileSync(FIXTURE, 'utf8')) as { paths: Record<string, Record<string, Record<string, unknown>>> };
    doc.paths['/api/v1/worker/claims'].post.security = [];
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'sw-roles-')), 'openapi.yaml');
    writeFileSync(file, stringify(doc));
    expect(() => compileSpec(file)).toThrow('openapi.yaml: claimWork is tagged Worker protocol but does not declare bearerAuth');
  });
});

describe('verdicts', () => {
  const kinds: Array<TokenKind | undefined> = [undefined, 'client', 'worker', 'metrics'];
  /** The verdict of each gate for no token, a client, a worker and the metrics token. */
  const table = (tokens: Parameters<typeof configWith>[0]) => {
    const gates = createGates(configWith(tokens));
    return Object.fromEntries(Object.entries(gates).map(([name, gate]) => [name, kinds.map((k) => decideAccess(gate, k))]));
  };

  test('with no token of any kind, every door is open', () => {
    expect(table({})).toEqual({
      client: ['allow', 'allow', 'allow', 'allow'],
      worker: ['allow', 'allow', 'allow', 'allow'],
      metrics: ['allow', 'allow', 'allow', 'allow'],
    });
  });

  test('with both kinds and a metrics token, each token opens its own door only (401 without one)', () => {
    expect(table({ client: ['c'], worker: ['w'], metrics: 'm' })).toEqual({
      client: ['unauthorized', 'allow', 'forbidden', 'forbidden'],
      worker: ['unauthorized', 'forbidden', 'allow', 'forbidden'],
      metrics: ['unauthorized', 'allow', 'forbidden', 'allow'],
    });
  });

  test('with worker tokens alone, auth is on: clients are refused, not let in; /metrics stays public', () => {
    expect(table({ worker: ['w'] })).toEqual({
      client: ['unauthorized', 'allow', 'forbidden', 'forbidden'],
      worker: ['unauthorized', 'forbidden', 'allow', 'forbidden'],
      metrics: ['allow', 'allow', 'allow', 'allow'],
    });
    // No client token exists, so no request can be of kind 'client': every client operation is closed.
    expect(createTokenKindReader(configWith({ worker: ['w'] }))('Bearer c')).toBeUndefined();
  });

  test('with client tokens alone, the worker protocol is closed to every token', () => {
    const read = createTokenKindReader(configWith({ client: ['c'] }));
    expect(decideAccess(createGates(configWith({ client: ['c'] })).worker, read('Bearer c'))).toBe('forbidden');
    expect(decideAccess(createGates(configWith({ client: ['c'] })).worker, read('Bearer w'))).toBe('unauthorized');
  });
});

describe('token kinds', () => {
  const read = createTokenKindReader(configWith({ client: ['c1', 'c2'], worker: ['w1'], metrics: 'm1' }));

  test('a Bearer header reads as the kind of the token it carries', () => {
    expect([read('Bearer c1'), read('bearer c2'), read('Bearer w1'), read('BEARER \tm1 ')]).toEqual(['client', 'client', 'worker', 'metrics']);
  });

  test('no header, another scheme, two tokens or an unknown token read as no kind', () => {
    for (const header of [undefined, '', 'Bearer', 'Basic w1', 'Token c1', 'Bearer c1 c1', 'Bearer c1x', 'Bearer w', 'Bearer W1']) {
      expect(read(header)).toBeUndefined();
    }
  });

  test('a client token that is also the metrics token reads as client, which /metrics accepts too', () => {
    const shared = createTokenKindReader(configWith({ client: ['same'], metrics: 'same' }));
    expect(shared('Bearer same')).toBe('client');
  });
});
