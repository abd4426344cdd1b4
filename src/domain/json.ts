/**
 * Checks that a value can be stored as jsonb: JSON.stringify must accept it (no BigInt, no cycles),
 * and PostgreSQL's jsonb rejects the NUL character. Returns the JSON text (undefined stays undefined).
 */
export function toStorableJson(value: unknown, what: string): string | undefined {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    throw new TypeError(`${what} is not JSON-serializable: ${(err as Error).message}`);
  }
  // JSON.stringify writes NUL as \u0000; a backslash before it is an escaped backslash, not a NUL.
  if (json !== undefined && json.includes('\\u0000') && /(?<!\\)(?:\\\\)*\\u0000/.test(json)) throw new TypeError(`${what} contains a NUL character, which PostgreSQL cannot store`);
  return json;
}
