/**
 * Task versions and patch ids (PRODUCT.md §9). A version names a release of a task's code; the
 * database keeps '' for a task defined without one, which the API shows as null.
 */

/** 1-64 characters: letters, digits and . _ : + - (a release tag, a date, a build number). */
export const TASK_VERSION = /^[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}$/;

/** A patch's change id: 1-200 characters of the same kinds, so it reads well in a step list. */
const CHANGE_ID = /^[A-Za-z0-9][A-Za-z0-9._:+/-]{0,199}$/;

/** The version a task definition declares, as stored ('' for none); a number is taken as its decimal text. */
export function parseTaskVersion(task: string, version: unknown): string {
  if (version === undefined || version === null) return '';
  const text = typeof version === 'number' && Number.isSafeInteger(version) && version >= 0 ? String(version) : version;
  if (typeof text !== 'string' || !TASK_VERSION.test(text)) {
    throw new TypeError(`task ${task}: version ${JSON.stringify(version)} must be 1-64 letters, digits or ._:+- characters, or a non-negative integer`);
  }
  return text;
}

/** Checks a change id given to ctx.patched or ctx.deprecatePatch. */
export function checkChangeId(what: string, id: unknown): asserts id is string {
  if (typeof id !== 'string' || !CHANGE_ID.test(id)) {
    throw new TypeError(`${what}(${JSON.stringify(id)}): a change id is 1-200 letters, digits or ._:+/- characters`);
  }
}

/** A stored version as the API shows it: null for a task defined without one. */
export const shownVersion = (stored: string | null): string | null => (stored === null || stored === '' ? null : stored);
