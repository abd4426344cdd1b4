import { LazyAbortController } from '../../src/engine/abort';

describe('LazyAbortController', () => {
  test('a signal asked for after the abort is already aborted, with the first reason', () => {
    const c = new LazyAbortController();
    const first = new Error('first');
    c.abort(first);
    c.abort(new Error('second'));
    expect(c.aborted).toBe(true);
    expect(c.reason).toBe(first);
    expect(c.signal.aborted).toBe(true);
    expect(c.signal.reason).toBe(first);
  });

  test('a signal handed out before the abort fires its listeners once, and stays the same signal', () => {
    const c = new LazyAbortController();
    const signal = c.signal;
    const seen: unknown[] = [];
    signal.addEventListener('abort', () => seen.push(signal.reason));
    expect(c.aborted).toBe(false);
    c.abort('stop');
    c.abort('again');
    expect(seen).toEqual(['stop']);
    expect(c.signal).toBe(signal);
  });
});
