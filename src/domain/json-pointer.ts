/**
 * JSON Pointers (RFC 6901) as flow-control keys use them: '/tenantId' names a value inside an
 * execution's `data`. Parsed into reference tokens, which PostgreSQL's `#>>` takes as a path.
 */

/** The reference tokens of `pointer`, or undefined when it is not a pointer ('' or starting with '/'). */
export function parsePointer(pointer: string): string[] | undefined {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) return undefined;
  const tokens = pointer.slice(1).split('/');
  // '~' may only escape '0' ('~') or '1' ('/').
  if (tokens.some((t) => /~(?![01])/.test(t))) return undefined;
  return tokens.map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}
