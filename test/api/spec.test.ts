// The contract itself: valid OpenAPI 3.1, complete, in step with the code, and a matcher that bites.
import { Validator } from '@seriousme/openapi-schema-validator';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { getSpec } from '../../src/api/spec';
import { findSpecViolations, type RecordedResponse } from '../helpers/spec-matcher';

type Json = Record<string, unknown>;
const spec = getSpec();
const doc = spec.document as { paths: Record<string, Record<string, Json>>; components: { schemas: Record<string, Json> } };

describe('openapi.yaml', () => {
  test('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(spec.text);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  test('every operation has an operationId, summary, description, an example, a 500 and, when protected, 401, 403 and 503', () => {
    for (const op of spec.operations.values()) {
      const raw = doc.paths[op.path][op.method.toLowerCase()];
      expect([op.operationId, raw.summary, raw.description].every((x) => typeof x === 'string' && x.length > 0)).toBe(true);
      expect(JSON.stringify(raw)).toMatch(/"example"/);
      expect(op.statuses).toContain('500');
      // 403: a token of the other kind (client or worker), as well as the cross-site guard.
      if (op.requiresAuth) expect(op.statuses).toEqual(expect.arrayContaining(['401', '403', '503']));
    }
  });

  test('every schema and every property of a component schema has a description', () => {
    const missing: string[] = [];
    const visit = (schema: Json, at: string) => {
      if (typeof schema.$ref === 'string') return;
      if (typeof schema.description !== 'string') missing.push(at);
      for (const [name, prop] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) {
        if (typeof prop.$ref !== 'string' && typeof prop.description !== 'string') missing.push(`${at}.${name}`);
      }
    };
    for (const [name, schema] of Object.entries(doc.components.schemas)) visit(schema, name);
    expect(missing).toEqual([]);
  });

  test('the ErrorCode enum lists exactly the codes of src/errors.ts', () => {
    // The typecheck proves the same (error-middleware.ts); this names the difference when it fails.
    const source = readFileSync(path.join(__dirname, '..', '..', 'src', 'errors.ts'), 'utf8');
    const union = /export type ErrorCode =([^;]+);/.exec(source)?.[1] ?? '';
    const codes = [...union.matchAll(/'([a-z_]+)'/g)].map((m) => m[1]);
    const enumCodes = (doc.components.schemas.ErrorCode as { enum: string[] }).enum;
    expect(codes.length).toBeGreaterThan(10);
    expect([...codes].sort()).toEqual([...enumCodes].sort());
  });
});

describe('the spec matcher', () => {
  const headers = new Headers({ 'X-Request-Id': 'r', 'Content-Type': 'application/json' });
  const rec = (status: number, body: unknown, h = headers, path = '/api/v1/executions/abc'): RecordedResponse => ({
    method: 'GET',
    path,
    status,
    headers: h,
    text: JSON.stringify(body),
    body,
  });

  test('passes a response the spec lists', () => {
    expect(findSpecViolations(rec(404, { error: { code: 'execution_not_found', message: 'm' } }))).toEqual([]);
  });

  test.each([
    ['a status the operation does not list', rec(400, { error: { code: 'invalid_json', message: 'm' } })],
    ['an error code the status does not allow', rec(404, { error: { code: 'route_not_found', message: 'm' } })],
    ['an extra field', rec(404, { error: { code: 'execution_not_found', message: 'm', stack: 'at x' } })],
    ['a body that is not the envelope', rec(404, { message: 'not found' })],
    ['a bad enum value', rec(200, { execution_id: '0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10', task: 't', status: 'bogus' })],
    ['a missing X-Request-Id', rec(404, { error: { code: 'execution_not_found', message: 'm' } }, new Headers({ 'Content-Type': 'application/json' }))],
    ['a 401 without WWW-Authenticate', rec(401, { error: { code: 'unauthorized', message: 'm' } })],
    ['an unrouted answer with the wrong code', rec(404, { error: { code: 'execution_not_found', message: 'm' } }, headers, '/nowhere')],
  ])('fails %s', (_what, response) => {
    expect(findSpecViolations(response)).not.toEqual([]);
  });
});
