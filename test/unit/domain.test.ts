import { parseDuration } from '../../src/domain/duration';
import { toInstant } from '../../src/domain/instant';
import { toStorableJson, toStoredValue } from '../../src/domain/json';
import { computeRetryDelay, hasAttemptsLeft, resolveRetryPolicy } from '../../src/domain/retry';
import { canTransition, isCancellable, isTerminal } from '../../src/domain/status';
import { isExecutionId, newExecutionId } from '../../src/domain/ids';
import { describeError } from '../../src/errors';

describe('durations', () => {
  test('parse ms strings and numbers, reject junk', () => {
    expect(parseDuration('10s')).toBe(10000);
    expect(parseDuration('7d')).toBe(604800000);
    expect(parseDuration(250)).toBe(250);
    expect(() => parseDuration('soon')).toThrow(RangeError);
    expect(() => parseDuration(-1)).toThrow(RangeError);
    expect(() => parseDuration(Number.NaN)).toThrow(RangeError);
  });
});

describe('retry backoff', () => {
  const policy = resolveRetryPolicy({ maxAttempts: 5, initialDelay: '1s', maxDelay: '10s' });
  test('grows exponentially with equal jitter and is capped', () => {
    expect(computeRetryDelay(policy, 1, () => 0)).toBe(500);
    expect(computeRetryDelay(policy, 1, () => 1)).toBe(1000);
    expect(computeRetryDelay(policy, 3, () => 1)).toBe(4000);
    expect(computeRetryDelay(policy, 10, () => 1)).toBe(10000);
    expect(computeRetryDelay(policy, 10, () => 0)).toBe(5000);
  });
  test('attempts run out at maxAttempts', () => {
    expect(hasAttemptsLeft(policy, 4)).toBe(true);
    expect(hasAttemptsLeft(policy, 5)).toBe(false);
  });
  test('bad policies are rejected', () => {
    expect(() => resolveRetryPolicy({ maxAttempts: 0 })).toThrow(RangeError);
    expect(() => resolveRetryPolicy({ initialDelay: 'never' })).toThrow(RangeError);
  });
});

describe('statuses', () => {
  test('terminal statuses have no moves; cancel is legal from every active one', () => {
    for (const s of ['completed', 'failed', 'cancelled'] as const) {
      expect(isTerminal(s)).toBe(true);
      expect(isCancellable(s)).toBe(false);
    }
    for (const s of ['pending', 'running', 'waiting'] as const) expect(isCancellable(s)).toBe(true);
    expect(canTransition('waiting', 'completed')).toBe(false);
    expect(canTransition('pending', 'running')).toBe(true);
  });
});

describe('ids', () => {
  test('new ids are UUIDv7 and sort by creation', () => {
    const a = newExecutionId();
    const b = newExecutionId();
    expect(a[14]).toBe('7');
    expect(isExecutionId(a)).toBe(true);
    expect(a < b).toBe(true);
    expect(isExecutionId('not-a-uuid')).toBe(false);
    expect(isExecutionId("1' OR '1'='1")).toBe(false);
  });
});

describe('storable JSON', () => {
  test('accepts JSON values and rejects BigInt, cycles and NUL', () => {
    expect(toStorableJson({ a: [1, 'x', null] }, 'v')).toBe('{"a":[1,"x",null]}');
    expect(toStorableJson(undefined, 'v')).toBeUndefined();
    expect(() => toStorableJson(10n, 'v')).toThrow(/not JSON-serializable/);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => toStorableJson(cyclic, 'v')).toThrow(/not JSON-serializable/);
    expect(() => toStorableJson('a\u0000b', 'v')).toThrow(/NUL/);
    // A literal backslash before "u0000" is text, not a NUL; a NUL after an escaped backslash is one.
    expect(toStorableJson('C:\\u0000dir', 'v')).toBe('"C:\\\\u0000dir"');
    expect(() => toStorableJson('\\\u0000', 'v')).toThrow(/NUL/);
    expect(() => toStorableJson({ ['k\u0000']: 1 }, 'v')).toThrow(/NUL/);
    // Unpaired surrogates, in values and in keys; a pair is fine, and so is the text "\ud800".
    expect(() => toStorableJson({ a: ['x\ud800'] }, 'v')).toThrow(/unpaired surrogate, .* at \/a\/0/);
    expect(() => toStorableJson({ ['\udc00']: 1 }, 'v')).toThrow(/unpaired surrogate/);
    expect(toStorableJson('😀', 'v')).toBe('"😀"');
    expect(toStorableJson('\\ud800', 'v')).toBe('"\\\\ud800"');
  });

  test('a stored value is what JSON makes of it', () => {
    expect(toStoredValue({ n: NaN, i: Infinity, u: undefined, d: new Date(0) }, 'v')).toEqual({ n: null, i: null, d: '1970-01-01T00:00:00.000Z' });
    expect(toStoredValue(undefined, 'v')).toBeNull();
    expect(() => toStoredValue({ s: { toJSON: () => 'a\ud800' } }, 'v')).toThrow(/unpaired surrogate/);
  });
});

describe('instants given in code', () => {
  test('take what the contract\'s date-time takes, and valid Dates in the years 0001-9999', () => {
    expect(toInstant('2024-10-30T19:00:00+01:00')?.toISOString()).toBe('2024-10-30T18:00:00.000Z');
    expect(toInstant('2016-12-31T23:59:60Z')?.toISOString()).toBe('2017-01-01T00:00:00.000Z');
    const d = new Date('2030-01-01T00:00:00Z');
    expect(toInstant(d)).toBe(d);
    for (const bad of ['2024-02-30T00:00:00Z', '2024-01-01T24:00:00Z', '2024-01-01T12:00:60Z', '2024-01-01T10:00:00', '2024-01-01', 'tomorrow', '']) {
      expect(toInstant(bad)).toBeUndefined();
    }
    expect(toInstant(new Date(NaN))).toBeUndefined();
    expect(toInstant(new Date(Date.UTC(10000, 0, 1)))).toBeUndefined();
  });
});

describe('error descriptions for logs', () => {
  test('keep type, SQLSTATE and message, drop the SQL knex prefixes and the stack', () => {
    const knexError = Object.assign(new Error('select * from "stepwise"."executions" where id = $1 - relation "x" does not exist'), { code: '42P01' });
    expect(describeError(knexError)).toEqual({ errType: 'Error', code: '42P01', message: 'relation "x" does not exist' });
    expect(JSON.stringify(describeError(new TypeError('boom')))).not.toContain(' at ');
  });
});
