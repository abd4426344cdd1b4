/** Idempotency key prefixes of the executions the engine starts itself: no client may use them. */
export const CRON_KEY_PREFIX = 'cron:';
export const CHILD_KEY_PREFIX = 'child:';

const RESERVED = [
  { prefix: CRON_KEY_PREFIX, owner: 'cron schedules' },
  { prefix: CHILD_KEY_PREFIX, owner: 'child executions' },
] as const;

/** The reserved prefix `key` starts with, and who uses it; undefined for a key a client may use. */
export function reservedKeyPrefix(key: string): (typeof RESERVED)[number] | undefined {
  return RESERVED.find((r) => key.startsWith(r.prefix));
}
