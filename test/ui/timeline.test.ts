import type { Execution, Step } from '../../src/client';
import { buildTimeline, describeWait } from '../../src/ui/timeline';

const T0 = Date.parse('2024-10-30T12:00:00.000Z');
const at = (ms: number) => new Date(T0 + ms).toISOString();

function step(seq: number, kind: Step['kind'], startMs: number, endMs: number | null, extra: Partial<Step> = {}): Step {
  return {
    seq,
    name: `${kind}-${seq}`,
    kind,
    status: endMs === null ? 'in_progress' : 'completed',
    result: null,
    wake_at: null,
    started_at: at(startMs),
    completed_at: endMs === null ? null : at(endMs),
    error: null,
    failed_attempts: [],
    ...extra,
  };
}

const running = { created_at: at(0), started_at: at(0), completed_at: null, status: 'waiting' as const };

describe('buildTimeline', () => {
  it('places steps in call order on one span, with durations and an unfinished wait lasting until now', () => {
    const steps = [step(1, 'event', 1000, null, { wake_at: at(60_000) }), step(0, 'step', 0, 1000)];
    const t = buildTimeline(running, steps, T0 + 4000);
    expect(t.entries.map((e) => [e.seq, e.state, e.durationMs])).toEqual([
      [0, 'completed', 1000],
      [1, 'waiting', 3000],
    ]);
    expect(t.startMs).toBe(T0);
    expect(t.endMs).toBe(T0 + 4000);
    expect(t.entries[0]).toMatchObject({ offsetPct: 0, widthPct: 25 });
    expect(t.entries[1]).toMatchObject({ offsetPct: 25, widthPct: 75, deadlineMs: T0 + 60_000 });
  });

  it('stops an unfinished step at the end of a cancelled execution instead of now', () => {
    const cancelled = { ...running, status: 'cancelled' as const, completed_at: at(2000) };
    const t = buildTimeline(cancelled, [step(0, 'sleep', 500, null, { wake_at: at(600_000) })], T0 + 900_000);
    expect(t.entries[0]).toMatchObject({ state: 'interrupted', durationMs: 1500 });
    expect(t.endMs).toBe(T0 + 2000);
  });

  it('marks an event wait that timed out and keeps zero-length bars visible', () => {
    const steps = [step(0, 'event', 0, 0, { result: { timed_out: true } }), step(1, 'step', 0, 0)];
    const t = buildTimeline({ ...running, status: 'completed', completed_at: at(10_000) }, steps, T0 + 20_000);
    expect(t.entries[0].timedOut).toBe(true);
    expect(t.entries[1].timedOut).toBe(false);
    expect(t.entries[1].widthPct).toBe(0.5);
  });

  it('shows a step whose retries ran out as failed, with its error, not as interrupted', () => {
    const failed = { ...running, status: 'failed' as const, completed_at: at(3000) };
    const error = { type: 'NonRetryableError', message: 'payment gateway timed out', retryable: false };
    const charge = step(1, 'step', 1000, 2000, {
      status: 'failed',
      error,
      failed_attempts: [{ attempt: 1, error, started_at: at(1000), ended_at: at(2000) }],
    });
    const t = buildTimeline(failed, [step(0, 'step', 0, 1000), charge], T0 + 60_000);
    expect(t.entries.map((e) => e.state)).toEqual(['completed', 'failed']);
    expect(t.entries[1]).toMatchObject({ durationMs: 1000, failures: 1, error: { type: 'NonRetryableError', message: 'payment gateway timed out' } });
    expect(t.entries[0].error).toBeNull();
  });

  it("keeps a step still being retried in progress with its last failure, and a cancelled one's as interrupted", () => {
    const boom = (n: number) => ({ attempt: n, error: { type: 'Error', message: `boom ${n}`, retryable: true }, started_at: at(0), ended_at: at(10) });
    const retrying = step(0, 'step', 0, null, { failed_attempts: [boom(1), boom(2)] });
    const t = buildTimeline(running, [retrying], T0 + 100);
    expect(t.entries[0]).toMatchObject({ state: 'running', failures: 2, error: { message: 'boom 2' } });
    const cancelled = buildTimeline(running, [step(0, 'sleep', 0, 50, { status: 'cancelled' })], T0 + 100);
    expect(cancelled.entries[0].state).toBe('interrupted');
  });

  it('labels in-progress sleeps and steps by what they are doing', () => {
    const t = buildTimeline(running, [step(0, 'sleep', 0, null), step(1, 'step', 0, null)], T0 + 1);
    expect(t.entries.map((e) => e.state)).toEqual(['sleeping', 'running']);
  });
});

describe('describeWait', () => {
  const base: Pick<Execution, 'status' | 'waiting_for_event' | 'created_at' | 'start_at' | 'attempt' | 'error' | 'current_step'> = {
    status: 'waiting',
    waiting_for_event: null,
    created_at: at(0),
    start_at: null,
    attempt: 1,
    error: null,
    current_step: 'cool-off',
  };

  it('names the awaited event with its timeout', () => {
    const w = describeWait({ ...base, waiting_for_event: { event_name: 'approval', since: at(5), timeout_at: at(100) } }, [], T0);
    expect(w).toEqual({ kind: 'event', eventName: 'approval', sinceMs: T0 + 5, timeoutMs: T0 + 100 });
  });

  it('names the child an execution waits for, and shows the wait as waiting', () => {
    const child = step(1, 'child', 0, null, { name: 'charge', result: { execution_id: 'c-1' } });
    const earlier = step(0, 'child', 0, 10, { name: 'pick', result: { execution_id: 'c-0', status: 'completed', output: 1, error: null } });
    expect(describeWait({ ...base, current_step: 'charge' }, [earlier, child], T0)).toEqual({ kind: 'child', name: 'charge', childId: 'c-1' });
    expect(buildTimeline(running, [earlier, child], T0 + 100).entries.map((e) => e.state)).toEqual(['completed', 'waiting']);
  });

  it('names a sleep and its wake-up time', () => {
    const w = describeWait(base, [step(0, 'sleep', 0, null, { name: 'cool-off', wake_at: at(600_000) })], T0);
    expect(w).toEqual({ kind: 'sleep', name: 'cool-off', untilMs: T0 + 600_000 });
  });

  it('tells a pending retry from a queued execution, and says nothing once finished', () => {
    expect(describeWait({ ...base, status: 'pending', error: { type: 'Error', message: 'boom', retryable: true } }, [], T0)).toEqual({
      kind: 'retry',
      attempt: 1,
      reason: 'boom',
    });
    expect(describeWait({ ...base, status: 'pending', attempt: 0 }, [], T0)).toEqual({ kind: 'queued', sinceMs: T0 });
    expect(describeWait({ ...base, status: 'completed' }, [], T0)).toBeNull();
  });

  it('tells an execution scheduled for later from one queued since its start time came', () => {
    const later = { ...base, status: 'pending' as const, attempt: 0, start_at: at(60_000) };
    expect(describeWait(later, [], T0 + 1000)).toEqual({ kind: 'scheduled', startMs: T0 + 60_000 });
    expect(describeWait(later, [], T0 + 61_000)).toEqual({ kind: 'queued', sinceMs: T0 + 60_000 });
    // A start in the past at scheduling: queued since it was created.
    expect(describeWait({ ...later, start_at: at(-5000) }, [], T0 + 1000)).toEqual({ kind: 'queued', sinceMs: T0 });
  });
});
