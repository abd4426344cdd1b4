import { TimeoutLists } from '../../src/api/timeout-lists';

describe('timeout lists', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('entries expire after their own duration, in the order they were added, with one timer per duration', () => {
    const expired: string[] = [];
    const timeouts = new TimeoutLists<string>((entry) => expired.push(entry));
    timeouts.add('a', 1000);
    jest.advanceTimersByTime(400);
    timeouts.add('b', 1000);
    timeouts.add('c', 300);
    timeouts.add('d', 1000);
    expect(jest.getTimerCount()).toBe(2);
    jest.advanceTimersByTime(299);
    expect(expired).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(expired).toEqual(['c']);
    jest.advanceTimersByTime(300);
    expect(expired).toEqual(['c', 'a']);
    jest.advanceTimersByTime(399);
    expect(expired).toEqual(['c', 'a']);
    jest.advanceTimersByTime(1);
    expect(expired).toEqual(['c', 'a', 'b', 'd']);
    expect(timeouts.size).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
  });

  test('a removed entry never expires, and a list left empty stops its timer', () => {
    const expired: string[] = [];
    const timeouts = new TimeoutLists<string>((entry) => expired.push(entry));
    timeouts.add('a', 1000);
    timeouts.add('b', 1000);
    timeouts.delete('a', 1000);
    jest.advanceTimersByTime(1000);
    expect(expired).toEqual(['b']);
    timeouts.add('c', 500);
    timeouts.delete('c', 500);
    expect(jest.getTimerCount()).toBe(0);
    jest.advanceTimersByTime(1000);
    expect(expired).toEqual(['b']);
  });

  test('removing the oldest entry leaves the next one expiring at its own deadline, not earlier', () => {
    const expired: string[] = [];
    const timeouts = new TimeoutLists<string>((entry) => expired.push(entry));
    timeouts.add('a', 1000);
    jest.advanceTimersByTime(600);
    timeouts.add('b', 1000);
    timeouts.delete('a', 1000);
    jest.advanceTimersByTime(400);
    expect(expired).toEqual([]);
    jest.advanceTimersByTime(599);
    expect(expired).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(expired).toEqual(['b']);
  });

  test('an entry added while others expire (by the expire callback) gets its full duration', () => {
    const expired: string[] = [];
    const timeouts = new TimeoutLists<string>((entry) => {
      expired.push(entry);
      if (entry === 'a') timeouts.add('again', 1000);
    });
    timeouts.add('a', 1000);
    jest.advanceTimersByTime(1000);
    expect(expired).toEqual(['a']);
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(999);
    expect(expired).toEqual(['a']);
    jest.advanceTimersByTime(1);
    expect(expired).toEqual(['a', 'again']);
    expect(jest.getTimerCount()).toBe(0);
  });
});
