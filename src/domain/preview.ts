/**
 * Thrown values and their fields are anything: cyclic, huge, BigInt, with getters that throw. A preview
 * describes them for a message without running their code (no getters, no toJSON) and stops early, so
 * describing an error can neither fail nor take long.
 */

/** Containers nested deeper than this are shown as `{…}` or `[…]`. */
const MAX_PREVIEW_DEPTH = 4;

const UNREADABLE = '[unreadable]';

/** Stands for a property defined by a getter, which is not run; a preview shows it as `[getter]`. */
export const GETTER: unique symbol = Symbol('getter');

/**
 * A property's value, own or inherited (as an Error's `name` is), read without running a getter:
 * GETTER when a getter defines it, undefined when absent.
 */
export function readDataProperty(object: object, key: PropertyKey): unknown {
  // Bounded: a prototype chain is short, unless a Proxy makes it endless.
  for (let holder: object | null = object, hops = 0; holder !== null && hops < 32; holder = Object.getPrototypeOf(holder) as object | null, hops += 1) {
    const descriptor = Object.getOwnPropertyDescriptor(holder, key);
    if (descriptor !== undefined) return 'value' in descriptor ? descriptor.value : GETTER;
  }
  return undefined;
}

/** `text` cut to at most `max` characters, never between the two halves of a surrogate pair. */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  const end = Math.max(0, max);
  const code = text.charCodeAt(end - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? end - 1 : end);
}

/**
 * A compact, JSON-like rendering of `value` of at most `maxChars` characters, ending in `…` when cut:
 * JSON where the value is JSON, readable forms elsewhere (`10n`, `NaN`, `[Function f]`, `Map(2)`,
 * `[Circular]`). Never throws.
 */
export function previewValue(value: unknown, maxChars = 200): string {
  const parts: string[] = [];
  let length = 0;
  const ancestors = new Set<object>();
  const emit = (text: string): boolean => {
    parts.push(text);
    length += text.length;
    return length <= maxChars;
  };
  const render = (item: unknown, depth: number): boolean => {
    if (typeof item === 'string') return emit(JSON.stringify(cutText(item, maxChars + 1)));
    if (typeof item === 'bigint') return emit(`${item}n`);
    if (item === GETTER) return emit('[getter]');
    if (typeof item === 'symbol') return emit(cutText(String(item), maxChars + 1));
    if (typeof item === 'function') return emit(`[Function${describeName(item)}]`);
    if (item === null || typeof item !== 'object') return emit(String(item));
    if (item instanceof Date) return emit(Number.isNaN(item.getTime()) ? 'Invalid Date' : JSON.stringify(item.toISOString()));
    if (item instanceof Error) return emit(`[${describeName(item).trim() || 'Error'}]`);
    if (item instanceof Map || item instanceof Set) return emit(`${item instanceof Map ? 'Map' : 'Set'}(${item.size})`);
    if (ancestors.has(item)) return emit('[Circular]');
    const isArray = Array.isArray(item);
    if (depth >= MAX_PREVIEW_DEPTH) return emit(isArray ? '[…]' : '{…}');
    ancestors.add(item);
    let open = emit(isArray ? '[' : '{');
    if (isArray) {
      for (let i = 0; open && i < item.length; i += 1) {
        const element = readDataProperty(item, String(i));
        open = (i === 0 || emit(',')) && render(element === undefined ? null : element, depth + 1);
      }
    } else {
      let first = true;
      for (const key of Object.keys(item)) {
        if (!open) break;
        const field = readDataProperty(item, key);
        if (field === undefined) continue; // as JSON leaves it out
        open = (first || emit(',')) && emit(`${JSON.stringify(cutText(key, maxChars + 1))}:`) && render(field, depth + 1);
        first = false;
      }
    }
    ancestors.delete(item);
    return open && emit(isArray ? ']' : '}');
  };
  let whole: boolean;
  try {
    whole = render(value, 0);
  } catch {
    return UNREADABLE; // a Proxy whose traps throw
  }
  const text = parts.join('');
  return whole ? text : `${cutText(text, maxChars - 1)}…`;
}

/** ` name` of a function, or ` Name: message` of an Error, read without running getters; '' when none. */
function describeName(item: object): string {
  const name = readDataProperty(item, 'name');
  if (typeof item === 'function') return typeof name === 'string' && name !== '' ? ` ${cutText(name, 100)}` : '';
  const message = readDataProperty(item, 'message');
  return ` ${typeof name === 'string' ? cutText(name, 100) : 'Error'}${typeof message === 'string' && message !== '' ? `: ${cutText(message, 200)}` : ''}`;
}
