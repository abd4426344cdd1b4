import { previewValue } from '../../src/domain/preview';
import { isStorableText } from '../../src/domain/storable-text';
import { describeThrown, describeThrownWithStack } from '../../src/domain/thrown';

describe('errors as stored', () => {
  test('an Error is its name and message, never its stack', () => {
    const described = describeThrown(new TypeError('boom'), true);
    expect(described).toStrictEqual({ type: 'TypeError', message: 'boom', retryable: true });
    class QuotaError extends Error {
      override name = 'QuotaError';
    }
    expect(describeThrown(new QuotaError('over'), false)).toStrictEqual({ type: 'QuotaError', message: 'over', retryable: false });
    expect(describeThrown(Object.assign(new Error('x'), { name: 'N'.repeat(1000) }), false).type).toHaveLength(200);
  });

  test("an Error's own extra fields follow its message, bounded", () => {
    const err = Object.assign(new Error('upstream failed'), { code: 'E42', status: 503, missing: undefined });
    expect(describeThrown(err, true).message).toBe('upstream failed (code: "E42", status: 503)');
    const noisy = Object.assign(new Error('x'), Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`f${i}`, i])));
    expect(describeThrown(noisy, true).message).toBe('x (f0: 0, f1: 1, f2: 2, f3: 3, f4: 4, f5: 5, f6: 6, f7: 7, … 4 more)');
    const huge = Object.assign(new Error('x'), { response: { body: 'y'.repeat(100_000) } });
    expect(describeThrown(huge, true).message.length).toBeLessThan(300);
    expect(describeThrown(Object.assign(new Error(''), { code: 'E1' }), true).message).toBe('(code: "E1")');
  });

  test('a DOMException (an abort reason) reads its name and message from getters', () => {
    const described = describeThrown(new DOMException('This operation was aborted', 'AbortError'), false);
    expect(described.type).toBe('AbortError');
    expect(described.message).toBe('This operation was aborted');
  });

  test('a thrown plain object is described by its name or type and its message, not "[object Object]"', () => {
    expect(describeThrown({ name: 'RateLimited', message: 'slow down', retryAfter: 30 }, true)).toStrictEqual({
      type: 'RateLimited',
      message: 'slow down (retryAfter: 30)',
      retryable: true,
    });
    expect(describeThrown({ type: 'validation', message: 'bad email' }, false).type).toBe('validation');
    expect(describeThrown({ code: 7, detail: ['a'] }, false)).toStrictEqual({ type: 'Object', message: '{"code":7,"detail":["a"]}', retryable: false });
    expect(describeThrown(Object.assign(Object.create(null) as object, { a: 1 }), false)).toMatchObject({ type: 'Object', message: '{"a":1}' });
    class Response {
      status = 500;
    }
    expect(describeThrown(new Response(), false)).toMatchObject({ type: 'Response', message: '{"status":500}' });
  });

  test('a thrown object that JSON cannot write is still described, without throwing', () => {
    const cyclic: Record<string, unknown> = { n: 10n };
    cyclic.self = cyclic;
    expect(describeThrown(cyclic, false).message).toBe('{"n":10n,"self":[Circular]}');
    const hostile = new Proxy(
      {},
      {
        ownKeys() {
          throw new Error('trap');
        },
        getOwnPropertyDescriptor() {
          throw new Error('trap');
        },
      },
    );
    expect(describeThrown(hostile, false)).toStrictEqual({ type: 'Error', message: 'a thrown value that could not be read', retryable: false });
    const getter = { get message(): string { throw new Error('nope'); } };
    expect(describeThrown(getter, false).message).toBe('{"message":[getter]}');
  });

  test('strings and other primitives are their text, typed Error', () => {
    expect(describeThrown('plain text', true)).toStrictEqual({ type: 'Error', message: 'plain text', retryable: true });
    expect(describeThrown(42, true)).toMatchObject({ type: 'Error', message: '42' });
    expect(describeThrown(null, true)).toMatchObject({ type: 'Error', message: 'null' });
    expect(describeThrown(undefined, true)).toMatchObject({ type: 'Error', message: 'undefined' });
    expect(describeThrown(Symbol('s'), true)).toMatchObject({ type: 'Error', message: 'Symbol(s)' });
    expect(describeThrown(function named() {}, true)).toMatchObject({ type: 'Function', message: '[Function named]' });
  });

  test('a long message is cut to maxMessage and says how long it was', () => {
    const described = describeThrown(new Error('m'.repeat(1_048_576)), true);
    expect(described.message).toHaveLength(4000);
    expect(described.message.endsWith('… [cut: 1,048,576 characters in all]')).toBe(true);
    expect(describeThrown('abcdef', true, 100).message).toBe('abcdef');
    expect(describeThrown('x'.repeat(200), true, 100).message).toHaveLength(100);
  });

  test('the cut never leaves half a surrogate pair, and NUL or unpaired surrogates are replaced', () => {
    const emoji = '😀'.repeat(3000);
    const described = describeThrown(emoji, true, 1000);
    expect(isStorableText(described.message)).toBe(true);
    expect(describeThrown('a\u0000b\ud800', true).message).toBe('a\ufffdb\ufffd');
    expect(describeThrown(Object.assign(new Error('x'), { name: 'Bad\u0000Name' }), true).type).toBe('Bad\ufffdName');
  });

  test('with the stack: bounded in UTF-8 bytes, ending in a marker; none for non-Errors', () => {
    const err = new Error('short');
    expect(describeThrownWithStack(err, false).stack).toBe(err.stack);
    expect(describeThrownWithStack('text', false)).toStrictEqual({ type: 'Error', message: 'text', retryable: false });
    const long = new Error('é'.repeat(20_000));
    const { stack, message } = describeThrownWithStack(long, false);
    expect(Buffer.byteLength(stack as string)).toBeLessThanOrEqual(8192);
    expect(stack).toMatch(/\n… \[cut: [\d,]+ bytes in all\]$/);
    expect(stack?.startsWith('Error: éé')).toBe(true);
    expect(message).toHaveLength(4000);
  });
});

describe('stacks with their causes', () => {
  test("a wrapper's stack is followed by its causes' stacks, a cycle ends, a non-Error cause is left out", () => {
    const root = new Error('payment gateway timed out');
    const wrapper = new Error('step "charge" failed', { cause: root });
    expect(describeThrownWithStack(wrapper, false).stack).toBe(`${wrapper.stack}\nCaused by: ${root.stack}`);
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(describeThrownWithStack(b, false).stack?.split('Caused by: ')).toHaveLength(5);
    const plain = new Error('x', { cause: 'text' });
    expect(describeThrownWithStack(plain, false).stack).toBe(plain.stack);
  });
});

describe('value previews for messages', () => {
  test('JSON where the value is JSON, readable forms elsewhere, cut with an ellipsis', () => {
    expect(previewValue({ a: [1, 'x', null], b: undefined })).toBe('{"a":[1,"x",null]}');
    expect(previewValue([NaN, 1n, new Date(0), new Map([[1, 2]]), new Set(), () => 1])).toBe('[NaN,1n,"1970-01-01T00:00:00.000Z",Map(1),Set(0),[Function]]');
    expect(previewValue({ a: { b: { c: { d: { e: 1 } } } } })).toBe('{"a":{"b":{"c":{"d":{…}}}}}');
    expect(previewValue(new RangeError('r'))).toBe('[RangeError: r]');
    const cut = previewValue(Array.from({ length: 1_000_000 }, (_, i) => i), 50);
    expect(cut).toHaveLength(50);
    expect(cut.endsWith('…')).toBe(true);
  });
});
