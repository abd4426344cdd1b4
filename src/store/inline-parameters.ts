/**
 * A quoted literal, a quoted identifier, or a parameter `$n` that is not part of an identifier. A
 * quote ends its literal unless another follows: pg.escapeLiteral and escapeIdentifier double quotes
 * and backslashes alike, so an E'' literal of theirs never holds a bare `\'` either.
 */
const TOKEN = /'(?:[^']|'')*'|"(?:[^"]|"")*"|(?<![\w$])\$(\d+)/g;

/**
 * `text` with each parameter `$n` replaced by `(values[n - 1])`, SQL expressions the caller has
 * escaped and cast already: PREPARE name(types) AS text followed by EXECUTE name(values) for a
 * connection that may not keep a prepared statement (a transaction pooler's). Literals and quoted
 * identifiers are copied untouched, so a task named '$1' stays a name. For statements Stepwise writes:
 * no dollar quoting, no comments.
 */
export function inlineParameters(text: string, values: readonly string[]): string {
  return text.replace(TOKEN, (token: string, n: string | undefined) => {
    if (n === undefined) return token;
    const value = values[Number(n) - 1];
    if (value === undefined) throw new Error(`statement parameter $${n} has no value (${values.length} given)`);
    return `(${value})`;
  });
}
