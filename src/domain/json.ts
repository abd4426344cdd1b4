import { findInJson, findUnstorableText } from './storable-text';
import type { Jsonify } from './jsonify';

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

/** Options of toFaithfulJson. */
export interface FaithfulJsonOptions {
  /** The most bytes the JSON text (UTF-8) may take; a larger value is refused with a RangeError. */
  maxBytes?: number;
}

/**
 * The deepest nesting of arrays and objects a value may have. PostgreSQL and JSON.stringify recurse
 * on nesting; far deeper input is a bug or an attack, not data.
 */
export const MAX_JSON_DEPTH = 1000;

type JsonContainer = unknown[] | Record<string, unknown>;

/** One value to convert: read from `holder[key]` when its turn comes, as JSON.stringify reads it. */
interface Visit {
  holder: object;
  key: string;
  parentAt: string | undefined;
  depth: number;
  out: JsonContainer;
}

/** Marks the end of an array or object, so that only its ancestors count as a cycle, not shared parts. */
interface Leave {
  leave: object;
}

/**
 * Objects JSON.stringify writes without their content (most as `{}`), by their built-in tag, which
 * holds across realms (a vm context, a test sandbox) where instanceof does not. Checked after toJSON
 * has run, so a class that gives its own JSON form (a Map subclass with toJSON, a Buffer) is taken
 * at its word.
 */
const LOSSY = new Map<string, readonly [thing: string, loss: string]>([
  ['Map', ['a Map', 'its entries would be lost']],
  ['Set', ['a Set', 'its members would be lost']],
  ['WeakMap', ['a WeakMap', 'its entries would be lost']],
  ['WeakSet', ['a WeakSet', 'its members would be lost']],
  ['ArrayBuffer', ['an ArrayBuffer', 'its bytes would be lost']],
  ['SharedArrayBuffer', ['a SharedArrayBuffer', 'its bytes would be lost']],
  ['DataView', ['a DataView', 'its bytes would be lost']],
  ['Promise', ['a Promise', 'its value would be lost; await it first']],
  ['Date', ['a Date that toJSON returned', 'its time would be lost']],
  ['RegExp', ['a RegExp', 'its pattern would be lost']],
  ['Error', ['an Error', 'its message would be lost']],
  ['DOMException', ['an Error', 'its message would be lost']],
]);

/** What JSON would lose of a non-plain object, as [thing, loss], or undefined when nothing. */
function findLoss(object: object): readonly [string, string] | undefined {
  const tag = Object.prototype.toString.call(object).slice(8, -1);
  if (ArrayBuffer.isView(object) && tag !== 'DataView') return [`a ${tag}`, 'it would become an object of indexes'];
  return LOSSY.get(tag);
}

function escapeKey(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** The JSON pointer of `key` in the value at `parentAt`; built only for a message or a container. */
function pointerOf(parentAt: string | undefined, key: string): string {
  return parentAt === undefined ? '' : `${parentAt}/${escapeKey(key)}`;
}

function refuseValue(what: string, at: string, thing: string, loss: string): never {
  const where = at === '' ? `is ${thing}` : `holds ${thing} at ${at}`;
  throw new TypeError(`${what} ${where}, which JSON cannot hold (${loss})`);
}

function refuseSize(what: string, bytes: number, maxBytes: number, bound: 'at least ' | ''): never {
  throw new RangeError(`${what} is ${bound}${bytes.toLocaleString('en-US')} bytes of JSON, more than the limit of ${maxBytes.toLocaleString('en-US')}`);
}

/** What JSON.stringify writes in place of `value` under `key`: toJSON's result, boxed primitives unwrapped. */
function applyToJson(value: unknown, key: string): unknown {
  let item = value;
  if ((typeof item === 'object' && item !== null) || typeof item === 'bigint') {
    const toJSON = (item as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') item = toJSON.call(item, key);
  }
  if (item instanceof Number) return Number(item);
  if (item instanceof String) return String(item);
  if (item instanceof Boolean || item instanceof BigInt) return item.valueOf();
  return item;
}

/**
 * The value as every run of a step sees it: its JSON form, `JSON.parse(JSON.stringify(value))` (a Date
 * becomes its ISO string, toJSON runs, undefined properties go, undefined array items become null;
 * undefined itself stays undefined). Replays read the stored JSON, so the first run must get the same.
 * Throws a TypeError, naming `what` and the JSON pointer of the place, for content JSON would lose
 * (Map, Set, BigInt, functions, symbols, NaN and Infinity, typed arrays, cycles) or PostgreSQL cannot
 * store (see toStorableJson), and a RangeError when the JSON text is over `maxBytes`.
 */
export function toFaithfulJson<T>(value: T, what: string, options: FaithfulJsonOptions = {}): Jsonify<T> {
  const { maxBytes } = options;
  const top: Record<string, unknown> = {};
  const ancestors = new Map<object, string>();
  const stack: Array<Visit | Leave> = [{ holder: { '': value }, key: '', parentAt: undefined, depth: 0, out: top }];
  // A lower bound of the JSON text's bytes, kept as the walk goes: a part referenced many times is
  // written once per reference, so a small value can stand for a text too large to build.
  let bytes = 0;
  while (stack.length > 0) {
    const task = stack.pop() as Visit | Leave;
    if ('leave' in task) {
      ancestors.delete(task.leave);
      continue;
    }
    const { holder, key, parentAt, depth, out } = task;
    const inArray = Array.isArray(out);
    const raw = (holder as Record<string, unknown>)[key];
    if (raw instanceof Date && Number.isNaN(raw.getTime())) refuseValue(what, pointerOf(parentAt, key), 'an invalid Date', 'it would become null');
    const item = applyToJson(raw, key);
    let json: unknown;
    if (item === undefined) {
      if (!inArray) continue;
      json = null;
      bytes += 4;
    } else if (item === null || typeof item === 'boolean' || typeof item === 'string') {
      json = item;
      bytes += typeof item === 'string' ? item.length + 2 : 4;
    } else if (typeof item === 'number') {
      if (!Number.isFinite(item)) refuseValue(what, pointerOf(parentAt, key), String(item), 'it would become null');
      json = item === 0 ? 0 : item; // -0 is written as 0
      bytes += 1;
    } else if (typeof item === 'bigint') {
      refuseValue(what, pointerOf(parentAt, key), 'a BigInt', 'convert it to a string or a number first');
    } else if (typeof item === 'function' || typeof item === 'symbol') {
      refuseValue(what, pointerOf(parentAt, key), `a ${typeof item}`, inArray ? 'it would become null' : 'it would be dropped');
    } else {
      const prototype = Object.getPrototypeOf(item) as unknown;
      if (prototype !== Object.prototype && prototype !== Array.prototype && prototype !== null) {
        const loss = findLoss(item);
        if (loss) refuseValue(what, pointerOf(parentAt, key), ...loss);
      }
      const seenAt = ancestors.get(item);
      if (seenAt !== undefined) refuseValue(what, pointerOf(parentAt, key), 'a cycle', `it refers back to ${seenAt === '' ? 'the whole value' : `the value at ${seenAt}`}`);
      if (depth >= MAX_JSON_DEPTH) throw new TypeError(`${what} is nested more than ${MAX_JSON_DEPTH.toLocaleString('en-US')} levels deep, more than a stored value may be`);
      // An array of n items takes at least 2n + 1 bytes: a huge sparse one is refused before it is walked.
      if (maxBytes !== undefined && Array.isArray(item) && bytes + 2 * item.length + 1 > maxBytes) refuseSize(what, bytes + 2 * item.length + 1, maxBytes, 'at least ');
      const at = pointerOf(parentAt, key);
      json = openContainer(item, at, depth, stack, what);
      ancestors.set(item, at);
      bytes += 2;
    }
    if (inArray) {
      if (key !== '0') bytes += 1;
      (out as unknown[]).push(json);
    } else {
      if (parentAt !== undefined) bytes += key.length + 3;
      // Plain assignment of __proto__ would set the prototype; JSON.parse makes it an own property.
      if (key === '__proto__') Object.defineProperty(out, key, { value: json, writable: true, enumerable: true, configurable: true });
      else (out as Record<string, unknown>)[key] = json;
    }
    if (maxBytes !== undefined && bytes > maxBytes) refuseSize(what, bytes, maxBytes, 'at least ');
  }
  const result = top[''];
  const text = toStorableJson(result, what);
  if (maxBytes !== undefined && text !== undefined) {
    const size = Buffer.byteLength(text, 'utf8');
    if (size > maxBytes) refuseSize(what, size, maxBytes, '');
  }
  return result as Jsonify<T>;
}

/**
 * The empty JSON form of an array or object, with its items queued on `stack` first to last, after a
 * Leave that closes it. Refuses enumerable symbol keys, which JSON drops.
 */
function openContainer(object: object, at: string, depth: number, stack: Array<Visit | Leave>, what: string): JsonContainer {
  stack.push({ leave: object });
  if (Array.isArray(object)) {
    const json: unknown[] = [];
    for (let i = object.length - 1; i >= 0; i -= 1) stack.push({ holder: object, key: String(i), parentAt: at, depth: depth + 1, out: json });
    return json;
  }
  for (const symbol of Object.getOwnPropertySymbols(object)) {
    if (Object.prototype.propertyIsEnumerable.call(object, symbol)) refuseValue(what, at, `a symbol key (${String(symbol).slice(0, 100)})`, 'it would be dropped');
  }
  const json: Record<string, unknown> = {};
  const keys = Object.keys(object);
  for (let i = keys.length - 1; i >= 0; i -= 1) stack.push({ holder: object, key: keys[i], parentAt: at, depth: depth + 1, out: json });
  return json;
}

/**
 * JSON text without its insignificant whitespace, every token kept as written: keys in their order,
 * numbers and strings spelled as they are (a parse and stringify would reorder integer-like keys and
 * re-spell numbers). For text PostgreSQL wrote, which puts spaces after `:` and `,`.
 */
export function compactJsonText(text: string): string {
  let out = '';
  let from = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) {
      out += text.slice(from, i);
      from = i + 1;
    }
  }
  return out + text.slice(from);
}
