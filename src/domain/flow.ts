import { parseDuration, type Duration } from './duration';
import { parsePointer } from './json-pointer';

/** A task's flow control as defineTask takes it (PRODUCT.md §8). Keys are JSON Pointers into `data`. */
export interface FlowOptions {
  /** At most `limit` executions run at once, per value of `key` when given, else over the whole task. */
  concurrency?: { limit: number; key?: string };
  /** At most `limit` starts in any window of `period`, per value of `key` when given. */
  rateLimit?: { limit: number; period: Duration; key?: string };
  /** A schedule within `period` of the last one replaces the pending execution's data and pushes its start. */
  debounce?: { period: Duration; key?: string };
}

/** A JSON Pointer together with its tokens, the path PostgreSQL's `#>>` reads. */
export interface FlowKey {
  pointer: string;
  path: string[];
}

/** Flow control as registered and applied: durations in milliseconds, keys parsed. */
export interface FlowPolicy {
  concurrency: { limit: number; key: FlowKey | null } | null;
  rateLimit: { limit: number; periodMs: number; key: FlowKey | null } | null;
  debounce: { periodMs: number; key: FlowKey | null } | null;
}

export const NO_FLOW: FlowPolicy = Object.freeze({ concurrency: null, rateLimit: null, debounce: null });

/** The longest rate-limit or debounce period: a day keeps the start log of a window small enough to count. */
const MAX_PERIOD_MS = 24 * 60 * 60 * 1000;

function flowKey(task: string, option: string, key: unknown): FlowKey | null {
  if (key === undefined) return null;
  const path = typeof key === 'string' ? parsePointer(key) : undefined;
  if (path === undefined || path.length === 0) {
    throw new TypeError(`task ${task}: ${option}.key must be a JSON Pointer into data such as '/tenantId', not ${JSON.stringify(key)}`);
  }
  return { pointer: key as string, path };
}

function wholeNumber(task: string, what: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 1_000_000) {
    throw new TypeError(`task ${task}: ${what} must be a whole number from 1 to 1,000,000, not ${JSON.stringify(value)}`);
  }
  return value;
}

function period(task: string, what: string, value: unknown): number {
  if (typeof value !== 'string' && typeof value !== 'number') throw new TypeError(`task ${task}: ${what} must be a duration such as '1m' or 60000, not ${JSON.stringify(value) ?? 'undefined'}`);
  let ms: number;
  try {
    ms = parseDuration(value as Duration, `task ${task}: ${what}`);
  } catch (err) {
    throw new TypeError((err as Error).message);
  }
  if (ms < 1 || ms > MAX_PERIOD_MS) throw new TypeError(`task ${task}: ${what} must be from 1 ms to 1 day, not ${JSON.stringify(value)}`);
  return ms;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Checks and normalizes a task's flow options; a TypeError names the task and the option at fault. */
export function parseFlow(task: string, options: FlowOptions): FlowPolicy {
  const { concurrency, rateLimit, debounce } = options as Record<string, unknown>;
  const policy: FlowPolicy = { concurrency: null, rateLimit: null, debounce: null };
  if (concurrency !== undefined) {
    if (!isObject(concurrency)) throw new TypeError(`task ${task}: concurrency must be { limit, key? }`);
    policy.concurrency = { limit: wholeNumber(task, 'concurrency.limit', concurrency.limit), key: flowKey(task, 'concurrency', concurrency.key) };
  }
  if (rateLimit !== undefined) {
    if (!isObject(rateLimit)) throw new TypeError(`task ${task}: rateLimit must be { limit, period, key? }`);
    policy.rateLimit = {
      limit: wholeNumber(task, 'rateLimit.limit', rateLimit.limit),
      periodMs: period(task, 'rateLimit.period', rateLimit.period),
      key: flowKey(task, 'rateLimit', rateLimit.key),
    };
  }
  if (debounce !== undefined) {
    if (!isObject(debounce)) throw new TypeError(`task ${task}: debounce must be { period, key? }`);
    policy.debounce = { periodMs: period(task, 'debounce.period', debounce.period), key: flowKey(task, 'debounce', debounce.key) };
  }
  return policy;
}

/** True when claims of the task must count (a concurrency limit or a rate limit): it is claimed apart. */
export function isThrottled(policy: FlowPolicy): boolean {
  return policy.concurrency !== null || policy.rateLimit !== null;
}

/**
 * True when a worker may claim the task ahead of its free handler slots (prefetch). Not with a rate
 * limit, whose starts are stamped at the claim and must not begin later in a burst; not with an
 * unkeyed concurrency limit, usually small, whose places a worker's buffer would keep from the
 * others. A keyed limit spreads a claim over its keys, so a buffer holds little of any one key.
 */
export function mayPrefetch(policy: FlowPolicy): boolean {
  return policy.rateLimit === null && policy.concurrency?.key != null;
}
