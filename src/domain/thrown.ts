import { cutText, previewValue, readDataProperty } from './preview';
import { replaceUnstorableText } from './storable-text';

/** A durable operation as a divergence names it: its kind (step, sleep, event, child, patch) and name. */
export interface OperationRef {
  kind: string;
  name: string;
}

/**
 * Where a replay left its history (a NonDeterminismError): the operation recorded at that point, or
 * null when the history holds none there, and the one the handler called instead.
 */
export interface Divergence {
  /** The operation's position in the history, from 1. */
  operation: number;
  recorded: OperationRef | null;
  called: OperationRef;
}

/** What a failed attempt stores as its error: what clients see, so never a stack. */
export interface ThrownDescription {
  type: string;
  message: string;
  retryable: boolean;
  /** Set for a replay that diverged from its history: both operations, for the dashboard to show. */
  divergence?: Divergence;
}

/** A ThrownDescription with the stack, for an operator's view; not for API clients. */
export interface ThrownDescriptionWithStack extends ThrownDescription {
  stack?: string;
}

const MAX_TYPE_CHARS = 200;
/** Extra fields shown after the message, and the characters of each value: enough for codes and statuses. */
const MAX_FIELDS = 8;
const MAX_FIELD_CHARS = 200;
/** Fields an Error already shows as its type and message, or must not show (the stack). */
const ERROR_FIELDS = new Set(['name', 'message', 'stack']);

/**
 * Describes anything a handler or step threw: an Error by its name and message, a thrown object by its
 * `name` or `type` and its `message` (or its JSON), a primitive as text. An Error's or object's own
 * extra fields (`code`, `status`) follow the message, so a code thrown with it is not lost. Never
 * throws; the message is at most `maxMessage` characters, ending in a marker when cut; text
 * PostgreSQL cannot store is replaced by U+FFFD.
 */
export function describeThrown(thrown: unknown, retryable: boolean, maxMessage = 4000): ThrownDescription {
  let type: string;
  let message: string;
  try {
    [type, message] = readThrown(thrown, maxMessage);
  } catch {
    // A Proxy or a getter that throws: the failure must still be recorded.
    [type, message] = ['Error', 'a thrown value that could not be read'];
  }
  const description = { type: replaceUnstorableText(cutText(type, MAX_TYPE_CHARS)), message: replaceUnstorableText(cutMessage(message, maxMessage)), retryable };
  const divergence = readDivergence(thrown);
  return divergence ? { ...description, divergence } : description;
}

/** The `divergence` an error carries (see NonDeterminismError), checked field by field; else undefined. */
function readDivergence(thrown: unknown): Divergence | undefined {
  try {
    if (typeof thrown !== 'object' || thrown === null) return undefined;
    const d = readDataProperty(thrown, 'divergence') as Partial<Divergence> | undefined;
    const ref = (r: unknown): OperationRef | undefined =>
      typeof r === 'object' && r !== null && typeof (r as OperationRef).kind === 'string' && typeof (r as OperationRef).name === 'string'
        ? { kind: cutText((r as OperationRef).kind, 20), name: replaceUnstorableText(cutText((r as OperationRef).name, 200)) }
        : undefined;
    if (typeof d !== 'object' || d === null || !Number.isSafeInteger(d.operation) || (d.operation as number) < 1) return undefined;
    const called = ref(d.called);
    const recorded = d.recorded === null ? null : ref(d.recorded);
    if (!called || recorded === undefined) return undefined;
    return { operation: d.operation as number, recorded, called };
  } catch {
    return undefined;
  }
}

/** How many `cause`s a stack follows: wrappers rarely nest deeper, and a cycle must end. */
const MAX_CAUSES = 4;

/**
 * describeThrown with the stack of an Error, cut to at most `maxStackBytes` bytes of UTF-8. The stacks
 * of its causes follow, each after `Caused by: `: a failed step's StepFailedError is thrown by the
 * engine, and the line of the task that threw is in its cause's stack.
 */
export function describeThrownWithStack(thrown: unknown, retryable: boolean, maxStackBytes = 8192): ThrownDescriptionWithStack {
  const description = describeThrown(thrown, retryable);
  const stacks: string[] = [];
  let current: unknown = thrown;
  try {
    for (let depth = 0; depth <= MAX_CAUSES && isError(current); depth++) {
      if (typeof current.stack === 'string') stacks.push(current.stack);
      current = current.cause;
    }
  } catch {
    // A getter that throws: keep the stacks read so far.
  }
  if (stacks.length === 0) return description;
  return { ...description, stack: cutBytes(replaceUnstorableText(stacks.join('\nCaused by: ')), maxStackBytes) };
}

/** Errors of other realms too (a vm context, a test runner's sandbox), where instanceof fails. */
function isError(value: unknown): value is Error {
  if (value instanceof Error) return true;
  const tag = Object.prototype.toString.call(value);
  return tag === '[object Error]' || tag === '[object DOMException]';
}

/** The type and full message of `thrown`; only JSON previews are bounded here, by `maxMessage`. */
function readThrown(thrown: unknown, maxMessage: number): [string, string] {
  if (isError(thrown)) {
    // Read as properties: DOMException (an abort's reason) defines name and message with getters.
    const { name, message } = thrown as { name: unknown; message: unknown };
    const text = typeof message === 'string' ? message : message === undefined ? '' : previewValue(message, maxMessage);
    return [typeof name === 'string' && name !== '' ? name : 'Error', appendFields(text, thrown, ERROR_FIELDS)];
  }
  if (typeof thrown === 'function') return ['Function', previewValue(thrown, maxMessage)];
  if (typeof thrown !== 'object' || thrown === null) return ['Error', String(thrown)];
  // Own data only: a plain object's fields are what was thrown, and its getters are not run.
  const name = readDataProperty(thrown, 'name');
  const typeField = readDataProperty(thrown, 'type');
  const message = readDataProperty(thrown, 'message');
  const typeKey = isNonEmptyString(name) ? 'name' : isNonEmptyString(typeField) ? 'type' : undefined;
  const type = typeKey === 'name' ? (name as string) : typeKey === 'type' ? (typeField as string) : describeConstructor(thrown);
  if (typeof message !== 'string') return [type, previewValue(thrown, maxMessage)];
  return [type, appendFields(message, thrown, new Set(['message', 'stack', ...(typeKey ? [typeKey] : [])]))];
}

function isNonEmptyString(value: unknown): value is string {
  return typeof value === 'string' && value !== '';
}

/** The name of the class `object` was made by ('Object' for a plain object or none at all). */
function describeConstructor(object: object): string {
  const constructor = readDataProperty(object, 'constructor');
  const name = typeof constructor === 'function' ? readDataProperty(constructor, 'name') : undefined;
  return isNonEmptyString(name) ? name : 'Object';
}

/**
 * `message (code: "E42", status: 503)`: the own enumerable fields of `object` not in `skip`, bounded.
 * Only plain values, and only those the message does not already say: an error class that keeps its
 * message's parts as fields (an id, a status) or carries a whole payload adds nothing.
 */
function appendFields(message: string, object: object, skip: ReadonlySet<string>): string {
  const fields: string[] = [];
  let more = 0;
  for (const key of Object.keys(object)) {
    if (skip.has(key)) continue;
    const value = readDataProperty(object, key);
    if (value === undefined || (typeof value === 'object' && value !== null) || typeof value === 'function') continue;
    if (message.includes(String(value))) continue;
    if (fields.length === MAX_FIELDS) more += 1;
    else fields.push(`${cutText(key, 100)}: ${previewValue(value, MAX_FIELD_CHARS)}`);
  }
  if (fields.length === 0) return message;
  if (more > 0) fields.push(`… ${more} more`);
  return message === '' ? `(${fields.join(', ')})` : `${message} (${fields.join(', ')})`;
}

/** `text` cut to `max` characters in all, the last of them a marker that says how long it was. */
function cutMessage(text: string, max: number): string {
  if (text.length <= max) return text;
  const marker = `… [cut: ${text.length.toLocaleString('en-US')} characters in all]`;
  return `${cutText(text, max - marker.length)}${marker}`;
}

/** `text` cut to `max` bytes of UTF-8 in all, the last of them a marker, never inside a character. */
function cutBytes(text: string, max: number): string {
  const size = Buffer.byteLength(text, 'utf8');
  if (size <= max) return text;
  const marker = `\n… [cut: ${size.toLocaleString('en-US')} bytes in all]`;
  const room = new Uint8Array(Math.max(0, max - Buffer.byteLength(marker, 'utf8')));
  const { read } = new TextEncoder().encodeInto(text, room);
  return `${text.slice(0, read)}${marker}`;
}
