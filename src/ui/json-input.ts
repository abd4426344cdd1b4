/** Pure: parses what an operator typed and checks it against a task's JSON Schema, in the browser. */
import { Validator, type OutputUnit, type Schema } from '@cfworker/json-schema';

export interface JsonProblem {
  /** A JSON pointer into the value (`/approved`), or '' for the value itself. */
  path: string;
  message: string;
}

export type JsonCheck = { ok: true; value: unknown } | { ok: false; problems: JsonProblem[] };

/** Keywords whose errors only say "a child failed"; the child's own error says why. */
const WRAPPER_KEYWORDS = new Set(['properties', 'items', 'prefixItems', 'allOf', '$ref', 'dependentSchemas', 'false', 'additionalItems']);

const validators = new WeakMap<object, Validator>();

function toProblem(unit: OutputUnit): JsonProblem {
  return { path: decodeURIComponent(unit.instanceLocation.replace(/^#/, '')), message: unit.error };
}

function validatorFor(schema: object | boolean): Validator {
  if (typeof schema === 'boolean') return new Validator(schema, '2020-12', false);
  let v = validators.get(schema);
  if (!v) {
    // The server checks with Ajv (draft 2020-12); @cfworker/json-schema implements the same draft
    // without code generation, so the page needs no 'unsafe-eval' in its content security policy.
    v = new Validator(schema as Schema, '2020-12', false);
    validators.set(schema, v);
  }
  return v;
}

/**
 * Parses `text` as JSON and, when `schema` is a JSON Schema (not null/undefined), validates it.
 * Returns every problem found, the most specific ones: "property x does not match"
 * wrappers are dropped when the nested error is there to say why.
 */
export function checkJson(text: string, schema: unknown): JsonCheck {
  if (text.trim() === '') return { ok: false, problems: [{ path: '', message: 'Enter a JSON value (null for none).' }] };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, problems: [{ path: '', message: `Not valid JSON: ${(err as Error).message}` }] };
  }
  if (schema === null || schema === undefined || (typeof schema !== 'object' && typeof schema !== 'boolean')) return { ok: true, value };
  let result;
  try {
    result = validatorFor(schema as object | boolean).validate(value);
  } catch {
    // A schema this validator cannot read: let the server, which registered it, be the judge.
    return { ok: true, value };
  }
  if (result.valid) return { ok: true, value };
  const leaves = result.errors.filter((e) => !WRAPPER_KEYWORDS.has(e.keyword));
  const chosen = leaves.length > 0 ? leaves : result.errors;
  const seen = new Set<string>();
  const problems = chosen.map(toProblem).filter((p) => {
    const key = `${p.path}\u0000${p.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return { ok: false, problems };
}

/**
 * A starting value for an editor, from a schema: an object with its required properties filled with
 * placeholders of the right type (or their defaults/consts), else `null`.
 */
export function sampleFromSchema(schema: unknown, depth = 0): unknown {
  if (!schema || typeof schema !== 'object' || depth > 4) return null;
  const s = schema as Record<string, unknown>;
  if ('default' in s) return s.default;
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'object': {
      const props = (s.properties ?? {}) as Record<string, unknown>;
      const required = Array.isArray(s.required) ? (s.required as string[]) : [];
      return Object.fromEntries(required.map((k) => [k, sampleFromSchema(props[k], depth + 1)]));
    }
    case 'array':
      return [];
    case 'string':
      return '';
    case 'integer':
    case 'number':
      return typeof s.minimum === 'number' ? s.minimum : 0;
    case 'boolean':
      return false;
    default:
      return null;
  }
}

/** The type a placeholder names for a schema: `<string>`, `<"fast" | "slow">`, `<integer ≥ 1>`. */
function typeHint(s: Record<string, unknown>): string {
  if ('const' in s) return JSON.stringify(s.const);
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  const types = Array.isArray(s.type) ? (s.type as unknown[]).map(String) : typeof s.type === 'string' ? [s.type] : [];
  const min = typeof s.minimum === 'number' ? ` ≥ ${s.minimum}` : '';
  return types.length === 0 ? 'any JSON' : `${types.join(' | ')}${types.some((t) => t === 'integer' || t === 'number') ? min : ''}`;
}

/**
 * The shape a schema asks for, as placeholder text for an empty editor: every property with the type
 * it takes in angle brackets (`"approved": <boolean>`), optional ones marked. Not JSON on purpose: a
 * placeholder is never sent, and no value is picked for the operator (a pre-filled `false` is one
 * click from rejecting an order).
 */
export function skeletonFromSchema(schema: unknown, indent = '', depth = 0): string {
  if (!schema || typeof schema !== 'object') return '<any JSON value>';
  const s = schema as Record<string, unknown>;
  const props = s.properties && typeof s.properties === 'object' ? (s.properties as Record<string, unknown>) : undefined;
  if ((s.type === 'object' || props) && props && Object.keys(props).length > 0 && depth < 4) {
    const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
    const inner = `${indent}  `;
    const lines = Object.entries(props).map(([key, sub]) => {
      const value = skeletonFromSchema(sub, inner, depth + 1);
      return `${inner}${JSON.stringify(key)}: ${value}${required.has(key) ? '' : ' (optional)'}`;
    });
    return `{\n${lines.join(',\n')}\n${indent}}`;
  }
  if (s.type === 'object') return '{}';
  if (s.type === 'array') return `[<${s.items && typeof s.items === 'object' ? typeHint(s.items as Record<string, unknown>) : 'any JSON'}>, …]`;
  return `<${typeHint(s)}>`;
}
