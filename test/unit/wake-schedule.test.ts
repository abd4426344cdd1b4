import { WakeSchedule } from '../../src/engine/wake-schedule';

describe('WakeSchedule', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  test('wakes at each instant in order, never before it, and once for instants passed together', () => {
    const woken: number[] = [];
    const schedule = new WakeSchedule(() => woken.push(Date.now()));
    schedule.add(1_000_500);
    schedule.add(1_000_100);
    schedule.add(1_000_100);
    schedule.add(1_000_300);
    jest.advanceTimersByTime(1000);
    expect(woken).toHaveLength(3);
    expect(woken[0]).toBeGreaterThanOrEqual(1_000_100);
    expect(woken[1]).toBeGreaterThanOrEqual(1_000_300);
    expect(woken[2]).toBeGreaterThanOrEqual(1_000_500);
    expect(schedule.size).toBe(0);
  });

  test('an earlier instant re-arms the one timer; nothing armed wakes nobody', () => {
    const woken: number[] = [];
    const schedule = new WakeSchedule(() => woken.push(Date.now()));
    jest.advanceTimersByTime(5000);
    expect(woken).toEqual([]);
    schedule.add(Date.now() + 800);
    schedule.add(Date.now() + 50);
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(60);
    expect(woken).toHaveLength(1);
    expect(schedule.size).toBe(1);
  });

  test('keeps at most its capacity, forgetting the latest; stop disarms it for good', () => {
    const woken: number[] = [];
    const schedule = new WakeSchedule(() => woken.push(Date.now()), 2);
    schedule.add(Date.now() + 300);
    schedule.add(Date.now() + 100);
    schedule.add(Date.now() + 200);
    expect(schedule.size).toBe(2);
    jest.advanceTimersByTime(1000);
    expect(woken).toHaveLength(2);
    schedule.add(Date.now() + 10);
    schedule.stop();
    schedule.add(Date.now() + 10);
    jest.advanceTimersByTime(1000);
    expect(woken).toHaveLength(2);
    expect(jest.getTimerCount()).toBe(0);
  });
});
