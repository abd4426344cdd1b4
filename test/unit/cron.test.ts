import { nextFireAfter, parseCronTrigger } from '../../src/domain/cron';
import { defineTask, Type } from '../../src/index';

describe('parseCronTrigger', () => {
  test('takes a pattern string (UTC, data null) or an object with a time zone and data', () => {
    expect(parseCronTrigger('t', '0 9 * * 1-5')).toEqual({ pattern: '0 9 * * 1-5', timezone: 'UTC', data: null });
    expect(parseCronTrigger('t', { pattern: '@hourly', timezone: 'Europe/Paris', data: { a: 1 } })).toEqual({
      pattern: '@hourly',
      timezone: 'Europe/Paris',
      data: { a: 1 },
    });
  });

  test('refuses a bad pattern, an unknown time zone or a wrong shape, naming the task', () => {
    expect(() => parseCronTrigger('report', '61 * * * *')).toThrow(/^task report: cron pattern "61 \* \* \* \*" is invalid: .*minute/);
    expect(() => parseCronTrigger('report', 'every day')).toThrow(/^task report: cron pattern "every day" is invalid/);
    expect(() => parseCronTrigger('report', { pattern: '* * * * *', timezone: 'Mars/Olympus' })).toThrow(
      'task report: cron time zone "Mars/Olympus" is not an IANA time zone',
    );
    expect(() => parseCronTrigger('report', 42 as never)).toThrow('task report: cron must be a pattern string or { pattern, timezone?, data? }');
    expect(() => parseCronTrigger('report', {} as never)).toThrow('task report: cron must be a pattern string or { pattern, timezone?, data? }');
  });
});

describe('nextFireAfter', () => {
  test('reads the pattern in its time zone, across a daylight-saving change', () => {
    const paris = { pattern: '0 9 * * *', timezone: 'Europe/Paris' };
    // Summer time (UTC+2) until 2026-10-25 03:00, then UTC+1.
    expect(nextFireAfter(paris, new Date('2026-10-24T12:00:00Z'))?.toISOString()).toBe('2026-10-25T08:00:00.000Z');
    expect(nextFireAfter(paris, new Date('2026-10-25T12:00:00Z'))?.toISOString()).toBe('2026-10-26T08:00:00.000Z');
  });

  test('is strictly after the given instant, to the second with a seconds field', () => {
    const everyTwo = { pattern: '*/2 * * * * *', timezone: 'UTC' };
    expect(nextFireAfter(everyTwo, new Date('2026-11-26T12:00:00.000Z'))?.toISOString()).toBe('2026-11-26T12:00:02.000Z');
    expect(nextFireAfter(everyTwo, new Date('2026-11-26T12:00:01.999Z'))?.toISOString()).toBe('2026-11-26T12:00:02.000Z');
  });
});

describe('defineTask with cron', () => {
  const run = async () => null;

  test('checks the trigger when the task is defined', () => {
    expect(() => defineTask({ name: 'bad-cron', cron: '* * *', run })).toThrow(/^task bad-cron: cron pattern/);
    expect(defineTask({ name: 'good-cron', cron: { pattern: '*/5 * * * *', timezone: 'America/New_York' }, run }).cron).toEqual({
      pattern: '*/5 * * * *',
      timezone: 'America/New_York',
    });
  });

  test("checks the trigger's data against the task's data schema", () => {
    const data = Type.Object({ region: Type.String() }, { additionalProperties: false });
    expect(() => defineTask({ name: 'no-data', data, cron: '0 * * * *', run })).toThrow(
      "task no-data: cron data does not match the task's data schema: / must be object",
    );
    expect(() => defineTask({ name: 'wrong-data', data, cron: { pattern: '0 * * * *', data: { region: 7 } as never }, run })).toThrow(
      "task wrong-data: cron data does not match the task's data schema: /region must be string",
    );
    expect(defineTask({ name: 'right-data', data, cron: { pattern: '0 * * * *', data: { region: 'eu' } }, run }).name).toBe('right-data');
  });
});
