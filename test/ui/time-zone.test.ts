import { formatInstantIn, formatOffset, fromDateTimeInput, toDateTimeInput, type OffsetAt } from '../../src/ui/time-zone';

const kolkata: OffsetAt = () => 330;
const newYork: OffsetAt = () => -240;
/** Berlin in 2024: UTC+1, and UTC+2 from 31 March 01:00 UTC to 27 October 01:00 UTC. */
const berlin: OffsetAt = (ms) => (ms >= Date.UTC(2024, 2, 31, 1) && ms < Date.UTC(2024, 9, 27, 1) ? 120 : 60);

describe('formatInstantIn', () => {
  it('shows UTC as before, with its suffix', () => {
    expect(formatInstantIn('2024-10-30T12:00:03.456Z', 'utc')).toBe('2024-10-30 12:00:03 UTC');
    expect(formatInstantIn(Date.UTC(2024, 9, 30, 12, 0, 3), 'utc')).toBe('2024-10-30 12:00:03 UTC');
  });

  it("shows local time with the zone's offset at that instant", () => {
    expect(formatInstantIn('2024-10-30T20:00:03Z', 'local', kolkata)).toBe('2024-10-31 01:30:03 UTC+05:30');
    expect(formatInstantIn('2024-10-30T02:00:00Z', 'local', newYork)).toBe('2024-10-29 22:00:00 UTC-04:00');
    expect(formatInstantIn('2024-07-01T12:00:00Z', 'local', berlin)).toBe('2024-07-01 14:00:00 UTC+02:00');
    expect(formatInstantIn('2024-12-01T12:00:00Z', 'local', berlin)).toBe('2024-12-01 13:00:00 UTC+01:00');
  });

  it('shows a dash for none and unreadable text as it is', () => {
    expect(formatInstantIn(null, 'local', kolkata)).toBe('–');
    expect(formatInstantIn(undefined, 'utc')).toBe('–');
    expect(formatInstantIn('soon', 'utc')).toBe('soon');
  });

  it('writes offsets so that UTC itself reads differently from UTC mode', () => {
    expect(formatOffset(0)).toBe('UTC+00:00');
    expect(formatOffset(-570)).toBe('UTC-09:30');
    expect(formatOffset(345)).toBe('UTC+05:45');
  });
});

describe('datetime inputs', () => {
  it('shows an instant as the wall time of the chosen zone, with seconds only when it has some', () => {
    expect(toDateTimeInput('2024-10-30T12:00:00Z', 'utc')).toBe('2024-10-30T12:00');
    expect(toDateTimeInput('2024-10-30T12:00:00Z', 'local', kolkata)).toBe('2024-10-30T17:30');
    expect(toDateTimeInput('2024-10-30T12:00:09Z', 'local', newYork)).toBe('2024-10-30T08:00:09');
    expect(toDateTimeInput(undefined, 'utc')).toBe('');
  });

  it('reads a typed wall time in the chosen zone', () => {
    expect(fromDateTimeInput('2024-10-30T12:00', 'utc')).toBe('2024-10-30T12:00:00Z');
    expect(fromDateTimeInput('2024-10-30T17:30', 'local', kolkata)).toBe('2024-10-30T12:00:00Z');
    expect(fromDateTimeInput('2024-10-30T08:00:09', 'local', newYork)).toBe('2024-10-30T12:00:09Z');
    expect(fromDateTimeInput('2024-10-30T08:00:09.5', 'utc')).toBe('2024-10-30T08:00:09.500Z');
    expect(fromDateTimeInput('', 'utc')).toBeUndefined();
    expect(fromDateTimeInput('30/10/2024 12:00', 'utc')).toBeUndefined();
  });

  it('uses the offset in force at the instant, not at the wall time read as UTC, next to a daylight-saving change', () => {
    // Read as UTC, each of these wall times falls on the other side of Berlin's change than the instant it names.
    expect(fromDateTimeInput('2024-10-27T01:30', 'local', berlin)).toBe('2024-10-26T23:30:00Z');
    expect(fromDateTimeInput('2024-03-31T01:30', 'local', berlin)).toBe('2024-03-31T00:30:00Z');
    expect(fromDateTimeInput('2024-07-01T14:00', 'local', berlin)).toBe('2024-07-01T12:00:00Z');
  });

  it('round-trips through the input in either zone', () => {
    for (const iso of ['2024-03-31T00:59:00Z', '2024-10-30T12:00:00Z', '2024-12-31T23:30:00Z']) {
      expect(fromDateTimeInput(toDateTimeInput(iso, 'local', berlin), 'local', berlin)).toBe(iso);
      expect(fromDateTimeInput(toDateTimeInput(iso, 'utc'), 'utc')).toBe(iso);
    }
  });
});
