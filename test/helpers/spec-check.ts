import { getSpec, type SpecOperation } from '../../src/api/spec';

/** One HTTP exchange as the tests see it: enough to check it against openapi.yaml. */
export interface RecordedResponse {
  method: string;
  /** The path after the server's base path, `/api/v1/executions/…`. */
  path: string;
  status: number;
  headers: Headers;
  /** The raw body text. */
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  body: unknown;
}

const UNROUTED_CODES: Record<number, string> = { 404: 'route_not_found', 405: 'method_not_allowed', 401: 'unauthorized', 403: 'forbidden' };

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Builds a RecordedResponse from a fetch Response (reads its body). */
export async function recordResponse(method: string, path: string, response: Response): Promise<RecordedResponse> {
  const text = await response.text();
  return { method: method.toUpperCase(), path, status: response.status, headers: response.headers, text, body: parseJson(text) };
}

/**
 * What is wrong with `res` according to openapi.yaml, using the same Ajv validators the server is
 * built from: the status must be one the operation lists, the body must match that response's
 * schema, its required headers must be present, and the media type must agree. A request that no
 * operation matches may only get the envelope with route_not_found, method_not_allowed, (under
 * `/api/v1`, before routing) unauthorized, or (from the cross-site guard, which runs before routing)
 * forbidden. An empty list means the response is in the contract.
 */
export function findSpecViolations(res: RecordedResponse, operationId?: string): string[] {
  const spec = getSpec();
  const problems: string[] = [];
  if (!res.headers.get('x-request-id')) problems.push('missing X-Request-Id header');
  const op: SpecOperation | undefined = operationId ? spec.operations.get(operationId) : spec.findOperation(res.method, res.path.split('?')[0]);
  if (operationId && !op) return [...problems, `openapi.yaml has no operation ${operationId}`];
  if (!op) {
    const code = UNROUTED_CODES[res.status];
    if (!code) return [...problems, `${res.method} ${res.path} matches no operation and answered ${res.status}`];
    if (!spec.validateErrorEnvelope(res.body)) problems.push(`body is not the error envelope: ${res.text.slice(0, 200)}`);
    else if ((res.body as { error: { code: string } }).error.code !== code) problems.push(`expected code ${code}, got ${(res.body as { error: { code: string } }).error.code}`);
    if (res.status === 405 && !res.headers.get('allow')) problems.push('405 without Allow header');
    return problems;
  }
  const expected = op.response(res.status);
  if (!expected) return [...problems, `${op.operationId} does not list status ${res.status} (lists ${op.statuses.join(', ')}); body ${res.text.slice(0, 200)}`];
  for (const header of expected.requiredHeaders) if (!res.headers.get(header)) problems.push(`${res.status} is missing required header ${header}`);
  if (res.method === 'HEAD') return problems;
  const contentType = res.headers.get('content-type') ?? '';
  if (expected.contentType && !contentType.startsWith(expected.contentType)) {
    problems.push(`content type ${contentType} is not ${expected.contentType}`);
  }
  if (expected.validate) {
    const value = expected.contentType === 'application/json' ? res.body : res.text;
    if (expected.contentType === 'application/json' && res.body === undefined) problems.push(`body is not JSON: ${res.text.slice(0, 200)}`);
    else if (!expected.validate(value)) {
      problems.push(`${op.operationId} ${res.status} body does not match the spec: ${JSON.stringify(expected.validate.errors?.slice(0, 3))} body ${res.text.slice(0, 300)}`);
    }
  }
  return problems;
}

/** Thrown by spec-checking fetch wrappers, so a test that gets an off-contract answer fails. */
export class SpecViolationError extends Error {}
