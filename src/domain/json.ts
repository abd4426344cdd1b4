import { findInJson, findUnstorableText } from './storable-text';

/**
 * Checks that a value can be stored as jsonb: JSON.stringify must accept it (no BigInt, no cycles),
 * and PostgreSQL's jsonb rejects the NUL character and unpaired UTF-16 surrogates, in values and keys
 * alike. Returns the JSON text (undefined stays undefined).
 */
export function toStorableJson(value: unknown, what: string): string | undefined {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    throw new TypeError(`${what} is not JSON-serializable: ${(err as Error).message}`);
  }
  if (json === undefined) return json;
  // JSON.stringify writes NUL as \u0000; a backslash before it is an escaped backslash, not a NUL.
  if (json.includes('\\u0000') && /(?<!\\)(?:\\\\)*\\u0000/.test(json)) throw new TypeError(`${what} contains a NUL character, which PostgreSQL cannot store`);
  // It writes an unpaired surrogate as an escape too (\udXXX): only then is the parsed text searched.
  if (json.includes('\\ud')) {
    const at = findUnstorableText(JSON.parse(json));
    if (at !== undefined) throw new TypeError(`${what} holds an unpaired surrogate, which PostgreSQL cannot store, at ${at || '/'}`);
  }
  return json;
}

/**
 * The value as it will be stored and read back: what JSON.stringify makes of it (NaN and Infinity
 * become null, toJSON() runs, undefined properties go), checked by toStorableJson. Validate this,
 * not the value given, so a schema judges what a handler will receive. Undefined is stored as null.
 */
export function toStoredValue(value: unknown, what: string): unknown {
  return JSON.parse(toStorableJson(value === undefined ? null : value, what) as string);
}

/**
 * The JSON pointer of the first number in `value` that is not finite, or undefined. JSON text has no
 * Infinity, but a literal such as 1e400 parses to it, and JSON.stringify then stores null: a value
 * other than the one a schema was shown.
 */
export function findNonFiniteNumber(value: unknown): string | undefined {
  return findInJson(value, (v) => typeof v === 'number' && !Number.isFinite(v));
}
