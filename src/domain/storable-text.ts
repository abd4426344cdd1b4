/**
 * PostgreSQL cannot store every string JSON can carry: text and jsonb refuse U+0000, and jsonb refuses
 * unpaired UTF-16 surrogates. Such input is the client's fault (422), found here before it reaches SQL
 * (where it would be a 500).
 */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');

/** True when PostgreSQL can store `text`. */
export function isStorableText(text: string): boolean {
  return !UNSTORABLE.test(text);
}

/**
 * `text` with each character PostgreSQL cannot store replaced by U+FFFD, for text we write on our own
 * account, such as an error message, where refusing would lose the error itself.
 */
export function replaceUnstorableText(text: string): string {
  return isStorableText(text) ? text : text.replace(UNSTORABLE_ALL, '\ufffd');
}

function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * The JSON pointer of the first value (or key) in `value` that `isBad` (or `isBadKey`) picks, or
 * undefined. Iterative, so deep input cannot exhaust the stack.
 */
export function findInJson(value: unknown, isBad: (leaf: unknown) => boolean, isBadKey: (key: string) => boolean = () => false): string | undefined {
  const stack: Array<[unknown, string]> = [[value, '']];
  while (stack.length > 0) {
    const [current, at] = stack.pop() as [unknown, string];
    if (Array.isArray(current)) {
      current.forEach((item, i) => stack.push([item, `${at}/${i}`]));
    } else if (current !== null && typeof current === 'object') {
      for (const [key, item] of Object.entries(current)) {
        if (isBadKey(key)) return `${at}/${escapePointer(key)}`;
        stack.push([item, `${at}/${escapePointer(key)}`]);
      }
    } else if (isBad(current)) return at;
  }
  return undefined;
}

/** The JSON pointer of the first string (value or key) in `value` that PostgreSQL cannot store, or undefined. */
export function findUnstorableText(value: unknown): string | undefined {
  return findInJson(value, (v) => typeof v === 'string' && !isStorableText(v), (key) => !isStorableText(key));
}
