import { isStorableText } from './storable-text';

/** Tags an execution may carry, as the contract's ScheduleExecutionRequest allows. */
export const MAX_TAGS = 20;
/** Characters (code points, as JSON Schema counts them) a tag may have. */
export const MAX_TAG_CHARS = 64;

/**
 * What is wrong with `tags` as an execution's tags, in the contract's terms (an array of at most 20
 * distinct strings of 1 to 64 characters), or undefined when nothing is. For callers the contract's
 * schema does not check: the SDK's schedule().
 */
export function describeBadTags(tags: unknown): string | undefined {
  if (!Array.isArray(tags)) return 'must be an array of strings';
  if (tags.length > MAX_TAGS) return `must hold at most ${MAX_TAGS} tags`;
  const bad = tags.findIndex((t) => typeof t !== 'string' || t.length === 0 || [...t].length > MAX_TAG_CHARS);
  if (bad >= 0) return `tag ${bad} must be a string of 1 to ${MAX_TAG_CHARS} characters`;
  const unstorable = tags.findIndex((t: string) => !isStorableText(t));
  if (unstorable >= 0) return `tag ${unstorable} holds text PostgreSQL cannot store`;
  if (new Set(tags).size !== tags.length) return 'must not repeat a tag';
  return undefined;
}
