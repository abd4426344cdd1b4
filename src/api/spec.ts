import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { parse as parseYaml } from 'yaml';

/** openapi.yaml at the package root: two levels up from both src/api and dist/api. */
export const SPEC_PATH = path.resolve(__dirname, '..', '..', 'openapi.yaml');

const SPEC_ID = 'openapi.json';
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'] as const;

/** OpenAPI keywords that sit where Ajv (strict) expects schema keywords. */
const OAS_KEYWORDS = [
  'openapi', 'info', 'servers', 'paths', 'components', 'security', 'tags', 'webhooks', 'jsonSchemaDialect',
  'externalDocs', 'example', 'xml', 'discriminator',
];

/** The tag of the worker protocol's operations: only worker tokens may use them, and they nothing else. */
export const WORKER_PROTOCOL_TAG = 'Worker protocol';

/** The kind of bearer token an operation under `bearerAuth` takes. */
export type TokenRole = 'client' | 'worker';

/** What a response of one status must look like. */
export interface SpecResponse {
  /** The media type the spec lists (application/json, text/plain, ...). */
  contentType: string | undefined;
  validate: ValidateFunction | undefined;
  /** Header names (lowercase) the spec marks required. */
  requiredHeaders: string[];
}

/** One operation of openapi.yaml with its request validators compiled. */
export interface SpecOperation {
  operationId: string;
  method: string;
  /** The OpenAPI path template, `/api/v1/executions/{id}`. */
  path: string;
  /** The same path as @koa/router writes it, `/api/v1/executions/:id`. */
  routerPath: string;
  /** The security scheme the operation declares (`bearerAuth` unless it says otherwise), or undefined for `security: []`. */
  securityScheme: string | undefined;
  /** True when it needs an API token (`bearerAuth`). */
  requiresAuth: boolean;
  /** The token it takes under `bearerAuth`: `worker` when tagged `Worker protocol`, else `client`. */
  role: TokenRole;
  pathParams: string[];
  queryParams: string[];
  /** Header parameters the operation declares, by their lower-case names (as Node gives headers). */
  headerParams: string[];
  validatePath: ValidateFunction;
  validateQuery: ValidateFunction;
  /** Over the declared headers only, by lower-case name: other headers are the transport's business. */
  validateHeaders: ValidateFunction;
  /** False for operations marked `x-unknown-query: ignore`: their query string is not checked. */
  strictQuery: boolean;
  /** Maximums applied after validation (`x-clamp-maximum`): too large is clamped, not rejected. */
  clamps: Record<string, number>;
  body: { required: boolean; validate: ValidateFunction } | undefined;
  /** The response statuses the spec lists, as strings ('200', '404'). */
  statuses: string[];
  /** Compiled on first use: the server never needs them, the tests always do. */
  response(status: number | string): SpecResponse | undefined;
}

/** The contract, parsed and compiled once per process. */
export interface CompiledSpec {
  text: string;
  document: Record<string, unknown>;
  operations: ReadonlyMap<string, SpecOperation>;
  /** Validates a body against the generic ErrorEnvelope (for answers that belong to no operation). */
  validateErrorEnvelope: ValidateFunction;
  /** The operation whose path template and method match, if any. */
  findOperation(method: string, pathname: string): SpecOperation | undefined;
}

type Json = Record<string, unknown>;

/** Escapes one JSON-pointer segment and makes it safe inside a URI fragment (`{id}` has braces). */
function pointerSegment(segment: string): string {
  return encodeURIComponent(segment.replace(/~/g, '~0').replace(/\//g, '~1'));
}

function pointer(...segments: string[]): string {
  return `${SPEC_ID}#/${segments.map(pointerSegment).join('/')}`;
}

/** Follows a `$ref` to a component (parameters, responses); returns the object and its pointer path. */
function deref(doc: Json, value: Json, at: string[]): { value: Json; at: string[] } {
  const ref = value.$ref;
  if (typeof ref !== 'string') return { value, at };
  const segments = ref.replace(/^#\//, '').split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  let target: unknown = doc;
  for (const s of segments) target = (target as Json)[s];
  if (!target || typeof target !== 'object') throw new Error(`openapi.yaml: unresolved $ref ${ref}`);
  return deref(doc, target as Json, segments);
}

function createAjv(options: { coerce: boolean }): Ajv2020 {
  const ajv = new Ajv2020({
    strict: true,
    allErrors: true,
    coerceTypes: options.coerce ? 'array' : false,
    useDefaults: options.coerce,
    // The document's own keywords (x-*, descriptions) are not validation keywords.
    strictTuples: false,
  });
  addFormats(ajv);
  ajv.addVocabulary(OAS_KEYWORDS);
  return ajv;
}

/** An object schema whose properties point at the parameters' own schemas: no schema is written twice. */
function compileParameters(ajv: Ajv2020, params: Array<{ value: Json; at: string[] }>, nameOf = (name: string) => name): ValidateFunction {
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const { value, at } of params) {
    const name = nameOf(value.name as string);
    const schema = value.schema as Json;
    // useDefaults does not look through a $ref, hence the sibling default.
    properties[name] = schema.default === undefined ? { $ref: pointer(...at, 'schema') } : { $ref: pointer(...at, 'schema'), default: schema.default };
    if (value.required === true) required.push(name);
  }
  return ajv.compile({ type: 'object', properties, required, additionalProperties: false });
}

/** The role an operation takes, read from its tags: never listed in code, so a new operation needs no edit here. */
function roleOf(op: Json): TokenRole {
  return Array.isArray(op.tags) && op.tags.includes(WORKER_PROTOCOL_TAG) ? 'worker' : 'client';
}

function compileOperation(doc: Json, ajvs: { plain: Ajv2020; coercing: Ajv2020 }, p: string, method: string, op: Json, pathItem: Json): SpecOperation {
  const at = ['paths', p, method];
  const params = [...((pathItem.parameters as Json[]) ?? []).map((v, i) => deref(doc, v, ['paths', p, 'parameters', String(i)])), ...((op.parameters as Json[]) ?? []).map((v, i) => deref(doc, v, [...at, 'parameters', String(i)]))];
  const pathParams = params.filter((x) => x.value.in === 'path');
  const queryParams = params.filter((x) => x.value.in === 'query');
  const headerParams = params.filter((x) => x.value.in === 'header');
  const clamps: Record<string, number> = {};
  for (const { value } of queryParams) if (typeof value['x-clamp-maximum'] === 'number') clamps[value.name as string] = value['x-clamp-maximum'];
  let body: SpecOperation['body'];
  if (op.requestBody) {
    const rb = deref(doc, op.requestBody as Json, [...at, 'requestBody']);
    const content = rb.value.content as Json;
    if (!content['application/json']) throw new Error(`openapi.yaml: ${String(op.operationId)} has a non-JSON request body`);
    body = { required: rb.value.required === true, validate: ajvs.plain.compile({ $ref: pointer(...rb.at, 'content', 'application/json', 'schema') }) };
  }
  const responses = op.responses as Json;
  const compiled = new Map<string, SpecResponse>();
  const security = (op.security ?? doc.security) as Json[] | undefined;
  const schemes = [...new Set((security ?? []).flatMap((requirement) => Object.keys(requirement)))];
  // The server mounts one authenticator per operation; alternatives it cannot enforce must not pass unnoticed.
  if (schemes.length > 1) throw new Error(`openapi.yaml: ${String(op.operationId)} declares more than one security scheme`);
  const role = roleOf(op);
  // Only bearerAuth tells the two roles apart: a worker operation under another scheme would be open to clients.
  if (role === 'worker' && schemes[0] !== 'bearerAuth') throw new Error(`openapi.yaml: ${String(op.operationId)} is tagged ${WORKER_PROTOCOL_TAG} but does not declare bearerAuth`);
  return {
    operationId: op.operationId as string,
    method: method.toUpperCase(),
    path: p,
    routerPath: p.replace(/\{([^}]+)\}/g, ':$1'),
    securityScheme: schemes[0],
    requiresAuth: schemes[0] === 'bearerAuth',
    role,
    pathParams: pathParams.map((x) => x.value.name as string),
    queryParams: queryParams.map((x) => x.value.name as string),
    headerParams: headerParams.map((x) => (x.value.name as string).toLowerCase()),
    validatePath: compileParameters(ajvs.plain, pathParams),
    validateQuery: compileParameters(ajvs.coercing, queryParams),
    validateHeaders: compileParameters(ajvs.plain, headerParams, (name) => name.toLowerCase()),
    strictQuery: op['x-unknown-query'] !== 'ignore',
    clamps,
    body,
    statuses: Object.keys(responses),
    response(status) {
      const key = String(status);
      if (!(key in responses)) return undefined;
      let result = compiled.get(key);
      if (!result) {
        const r = deref(doc, responses[key] as Json, [...at, 'responses', key]);
        const content = (r.value.content ?? {}) as Json;
        const contentType = Object.keys(content)[0];
        const headers = (r.value.headers ?? {}) as Json;
        result = {
          contentType,
          validate: contentType ? ajvs.plain.compile({ $ref: pointer(...r.at, 'content', contentType, 'schema') }) : undefined,
          requiredHeaders: Object.entries(headers)
            .filter(([, h]) => deref(doc, h as Json, []).value.required === true)
            .map(([name]) => name.toLowerCase()),
        };
        compiled.set(key, result);
      }
      return result;
    },
  };
}

/** Parses openapi.yaml and compiles every operation's request validators with Ajv (draft 2020-12). */
export function compileSpec(file = SPEC_PATH): CompiledSpec {
  const text = readFileSync(file, 'utf8');
  const document = parseYaml(text) as Json;
  const ajvs = { plain: createAjv({ coerce: false }), coercing: createAjv({ coerce: true }) };
  for (const ajv of Object.values(ajvs)) ajv.addSchema(document, SPEC_ID);
  const operations = new Map<string, SpecOperation>();
  const matchers: Array<{ regex: RegExp; op: SpecOperation }> = [];
  for (const [p, item] of Object.entries(document.paths as Json)) {
    const pathItem = item as Json;
    for (const method of METHODS) {
      const op = pathItem[method] as Json | undefined;
      if (!op) continue;
      const compiled = compileOperation(document, ajvs, p, method, op, pathItem);
      if (operations.has(compiled.operationId)) throw new Error(`openapi.yaml: duplicate operationId ${compiled.operationId}`);
      operations.set(compiled.operationId, compiled);
      const source = p.split(/\{[^}]+\}/).map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[^/]+');
      matchers.push({ regex: new RegExp(`^${source}$`), op: compiled });
    }
  }
  return {
    text,
    document,
    operations,
    validateErrorEnvelope: ajvs.plain.compile({ $ref: pointer('components', 'schemas', 'ErrorEnvelope') }),
    findOperation(method, pathname) {
      const m = method.toUpperCase() === 'HEAD' ? 'GET' : method.toUpperCase();
      return matchers.find((x) => x.op.method === m && x.regex.test(pathname))?.op;
    },
  };
}

let cached: CompiledSpec | undefined;

/** The compiled contract, built on first use (not at import time) and shared by every server in the process. */
export function getSpec(): CompiledSpec {
  cached ??= compileSpec();
  return cached;
}
