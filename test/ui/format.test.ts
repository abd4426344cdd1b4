import { elapsedMs, formatDuration, formatInstant, formatRelative, previewJson } from '../../src/domain/format';

describe('formatDuration', () => {
  it.each([
    [0, '0 ms'],
    [350, '350 ms'],
    [999.6, '1000 ms'],
    [1000, '1.0 s'],
    [4249, '4.2 s'],
    [42_000, '42 s'],
    [185_000, '3m 05s'],
    [2 * 3600_000 + 3 * 60_000, '2h 03m'],
    [3 * 86_400_000 + 4 * 3600_000 + 1, '3d 04h'],
    [-1500, '-1.5 s'],
    [Infinity, '–'],
  ])('shows %p ms as %p', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});

describe('formatRelative', () => {
  it('says now within half a second, else in/ago', () => {
    expect(formatRelative(1_000, 1_200)).toBe('now');
    expect(formatRelative(5_000, 1_000)).toBe('in 4.0 s');
    expect(formatRelative(1_000, 186_000)).toBe('3m 05s ago');
  });
});

describe('formatInstant and elapsedMs', () => {
  it('shows instants in UTC to the second and dashes for null', () => {
    expect(formatInstant('2024-10-30T12:00:03.456Z')).toBe('2024-10-30 12:00:03 UTC');
    expect(formatInstant(null)).toBe('–');
  });

  it('measures up to now when the end is missing, and null without a start', () => {
    expect(elapsedMs('2024-10-30T12:00:00.000Z', '2024-10-30T12:00:01.500Z', 0)).toBe(1500);
    expect(elapsedMs('2024-10-30T12:00:00.000Z', null, Date.parse('2024-10-30T12:00:02.000Z'))).toBe(2000);
    expect(elapsedMs(null, null, 0)).toBeNull();
  });
});

describe('previewJson', () => {
  it('cuts long values with an ellipsis and reads undefined as null', () => {
    expect(previewJson({ a: 'x'.repeat(100) }, 20)).toHaveLength(20);
    expect(previewJson(undefined)).toBe('null');
  });
});
