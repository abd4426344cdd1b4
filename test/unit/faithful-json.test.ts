import vm from 'node:vm';
import fc from 'fast-check';
import { MAX_JSON_DEPTH, toFaithfulJson } from '../../src/domain/json';

const WHAT = 'the result of step "load"';

/** What a replay reads back: the stored JSON text, parsed. */
function replayed(value: unknown): unknown {
  const text = JSON.stringify(value);
  return text === undefined ? undefined : JSON.parse(text);
}

describe('faithful step values: the first run gets what a replay gets', () => {
  test('any JSON-like value comes back as its JSON form', () => {
    const anything = fc.oneof(
      fc.jsonValue(),
      fc.object({ values: [fc.constant(undefined), fc.date({ noInvalidDate: true }), fc.integer(), fc.string()] }),
      fc.array(fc.oneof(fc.constant(undefined), fc.date({ noInvalidDate: true }), fc.double({ noNaN: true, noDefaultInfinity: true }))),
    );
    fc.assert(
      fc.property(anything, (value) => {
        expect(toFaithfulJson(value, WHAT)).toStrictEqual(replayed(value));
      }),
    );
  });

  test('a Date is its ISO string, at the top and inside', () => {
    const at = new Date('2024-10-30T18:00:00.000Z');
    expect(toFaithfulJson(at, WHAT)).toBe('2024-10-30T18:00:00.000Z');
    expect(toFaithfulJson({ at: [at] }, WHAT)).toEqual({ at: ['2024-10-30T18:00:00.000Z'] });
  });

  test('class instances and toJSON give their JSON form, toJSON called with its key', () => {
    class Money {
      constructor(
        readonly amount: number,
        readonly currency: string,
      ) {}
      format(): string {
        return `${this.amount} ${this.currency}`;
      }
    }
    const result = toFaithfulJson({ price: new Money(5, 'EUR') }, WHAT);
    expect(result).toStrictEqual({ price: { amount: 5, currency: 'EUR' } });
    expect(Object.getPrototypeOf(result.price)).toBe(Object.prototype);
    const keys: string[] = [];
    const keyed = { toJSON: (key: string) => (keys.push(key), `as ${key}`) };
    expect(toFaithfulJson({ a: keyed, list: [keyed] }, WHAT)).toEqual({ a: 'as a', list: ['as 0'] });
    expect(keys).toEqual(['a', '0']);
    expect(toFaithfulJson(Buffer.from('hi'), WHAT)).toEqual({ type: 'Buffer', data: [104, 105] });
  });

  test('undefined stays undefined at the top, is absent as a property and null in an array', () => {
    expect(toFaithfulJson(undefined, WHAT)).toBeUndefined();
    const result = toFaithfulJson({ a: undefined, b: 1 }, WHAT);
    expect(result).toStrictEqual({ b: 1 });
    expect('a' in result).toBe(false);
    expect(toFaithfulJson([undefined, , 2], WHAT)).toStrictEqual([null, null, 2]);
    expect(toFaithfulJson({ gone: { toJSON: () => undefined } }, WHAT)).toStrictEqual({});
  });

  test('boxed primitives are unwrapped, -0 is 0, and a __proto__ key stays an own key', () => {
    expect(toFaithfulJson([Object(1), Object('s'), Object(true), -0], WHAT)).toStrictEqual([1, 's', true, 0]);
    const parsed = JSON.parse('{"__proto__": {"polluted": true}}') as object;
    const result = toFaithfulJson(parsed, WHAT) as Record<string, unknown>;
    expect(Object.getPrototypeOf(result)).toBe(Object.prototype);
    expect(Object.keys(result)).toEqual(['__proto__']);
    expect(result).toStrictEqual(replayed(parsed));
  });

  test('a part referenced twice is two copies, as in JSON, not a cycle', () => {
    const shared = { n: 1 };
    const result = toFaithfulJson({ a: shared, b: [shared] }, WHAT);
    expect(result).toEqual({ a: { n: 1 }, b: [{ n: 1 }] });
    expect(result.a).not.toBe(shared);
  });
});

describe('faithful step values: content JSON would lose is refused, naming the place', () => {
  test.each([
    ['a Map', { items: new Map([['a', 1]]) }, /^the result of step "load" holds a Map at \/items, which JSON cannot hold \(its entries would be lost\)$/],
    ['a Set', { tags: [new Set([1])] }, /holds a Set at \/tags\/0, .*its members would be lost/],
    ['a WeakMap', { w: new WeakMap() }, /holds a WeakMap at \/w/],
    ['a WeakSet', { w: new WeakSet() }, /holds a WeakSet at \/w/],
    ['a BigInt', { n: 10n }, /holds a BigInt at \/n, which JSON cannot hold \(convert it to a string or a number first\)/],
    ['a function property', { f: () => 1 }, /holds a function at \/f, .*\(it would be dropped\)/],
    ['a function in an array', [() => 1], /holds a function at \/0, .*\(it would become null\)/],
    ['a symbol value', { s: Symbol('x') }, /holds a symbol at \/s/],
    ['a symbol key', { [Symbol('k')]: 1 }, /is a symbol key \(Symbol\(k\)\), which JSON cannot hold \(it would be dropped\)/],
    ['NaN', { x: [1, NaN] }, /holds NaN at \/x\/1, .*\(it would become null\)/],
    ['Infinity', { x: -Infinity }, /holds -Infinity at \/x/],
    ['a typed array', { bytes: new Uint8Array([1]) }, /holds a Uint8Array at \/bytes, .*\(it would become an object of indexes\)/],
    ['an ArrayBuffer', { buf: new ArrayBuffer(4) }, /holds an ArrayBuffer at \/buf, .*its bytes would be lost/],
    ['an invalid Date', { at: new Date(NaN) }, /holds an invalid Date at \/at, .*\(it would become null\)/],
    ['a Promise', { p: Promise.resolve(1) }, /holds a Promise at \/p, .*await it first/],
    ['a Date returned by toJSON', { d: { toJSON: () => new Date(0) } }, /holds a Date that toJSON returned at \/d/],
    ['a key with / and ~', { 'a/b~c': new Map() }, /holds a Map at \/a~1b~0c/],
  ])('%s', (_, value, message) => {
    expect(() => toFaithfulJson(value, WHAT)).toThrow(TypeError);
    expect(() => toFaithfulJson(value, WHAT)).toThrow(message);
  });

  test('a refused value at the top says what it is', () => {
    expect(() => toFaithfulJson(new Map(), WHAT)).toThrow(/^the result of step "load" is a Map, which JSON cannot hold/);
    expect(() => toFaithfulJson(() => 1, WHAT)).toThrow(/is a function, .*it would be dropped/);
    expect(() => toFaithfulJson(1n, WHAT)).toThrow(/is a BigInt/);
  });

  test('a cycle names where it closes and what it refers back to', () => {
    const root: Record<string, unknown> = { list: [] };
    const child = { parent: root };
    (root.list as unknown[]).push(child);
    expect(() => toFaithfulJson(root, WHAT)).toThrow(/holds a cycle at \/list\/0\/parent, .*\(it refers back to the whole value\)/);
    const inner: Record<string, unknown> = {};
    inner.self = inner;
    expect(() => toFaithfulJson({ a: inner }, WHAT)).toThrow(/holds a cycle at \/a\/self, .*the value at \/a\)/);
  });

  test('text PostgreSQL cannot store is refused as toStorableJson refuses it', () => {
    expect(() => toFaithfulJson({ s: 'a\u0000b' }, WHAT)).toThrow(/NUL/);
    expect(() => toFaithfulJson({ s: ['x\ud800'] }, WHAT)).toThrow(/unpaired surrogate, .* at \/s\/0/);
  });

  test('deep nesting is refused without exhausting the stack', () => {
    const nest = (levels: number): unknown => {
      let value: unknown = 1;
      for (let i = 0; i < levels; i += 1) value = [value];
      return value;
    };
    expect(() => toFaithfulJson(nest(MAX_JSON_DEPTH), WHAT)).not.toThrow();
    expect(() => toFaithfulJson(nest(MAX_JSON_DEPTH + 1), WHAT)).toThrow(/is nested more than 1,000 levels deep/);
    expect(() => toFaithfulJson(nest(1_000_000), WHAT)).toThrow(TypeError);
  });
});

describe('faithful step values: size', () => {
  test('a value over maxBytes of UTF-8 JSON is a RangeError naming it, its size and the limit', () => {
    expect(toFaithfulJson({ s: 'x'.repeat(10) }, WHAT, { maxBytes: 18 })).toEqual({ s: 'xxxxxxxxxx' });
    // '{"s":"éééééééééé"}' is 8 bytes of syntax and 20 of text.
    expect(() => toFaithfulJson({ s: 'é'.repeat(10) }, WHAT, { maxBytes: 27 })).toThrow(RangeError);
    expect(() => toFaithfulJson({ s: 'é'.repeat(10) }, WHAT, { maxBytes: 27 })).toThrow(
      /^the result of step "load" is 28 bytes of JSON, more than the limit of 27$/,
    );
    expect(toFaithfulJson({ s: 'é'.repeat(10) }, WHAT, { maxBytes: 28 })).toEqual({ s: 'é'.repeat(10) });
  });

  test('a small value standing for a huge text stops early', () => {
    // Each level doubles the text: 2^60 copies of the leaf would never finish.
    let value: unknown = 'x'.repeat(100);
    for (let i = 0; i < 60; i += 1) value = [value, value];
    expect(() => toFaithfulJson(value, WHAT, { maxBytes: 4 * 1024 * 1024 })).toThrow(/^the result of step "load" is at least [\d,]+ bytes of JSON, more than the limit of 4,194,304$/);
    const sparse: unknown[] = [];
    sparse.length = 2 ** 31;
    expect(() => toFaithfulJson({ sparse }, WHAT, { maxBytes: 1000 })).toThrow(/is at least 4,294,967,2\d\d bytes of JSON/);
  });
});

describe('faithful step values: other realms', () => {
  test('a Map or Date from another realm (a vm context) is judged as one from this realm', () => {
    const foreign = vm.runInNewContext('({ items: new Map([["a", 1]]), at: new Date(0) })') as { items: unknown; at: unknown };
    expect(() => toFaithfulJson({ items: foreign.items }, WHAT)).toThrow(/holds a Map at \/items/);
    expect(toFaithfulJson({ at: foreign.at }, WHAT)).toEqual({ at: '1970-01-01T00:00:00.000Z' });
  });
});
