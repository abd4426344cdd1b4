import type { Attempt, Step } from '../../src/client';
import { runTimes } from '../../src/ui/run-time';

const T0 = Date.parse('2024-10-30T12:00:00.000Z');
const at = (ms: number) => new Date(T0 + ms).toISOString();
const MIN = 60_000;

function attempt(n: number, startMs: number, endMs: number | null, outcome: Attempt['outcome'] = endMs === null ? null : 'completed'): Attempt {
  return { attempt: n, worker_id: null, started_at: at(startMs), ended_at: endMs === null ? null : at(endMs), outcome, error: null };
}

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

describe('runTimes', () => {
  it('sums the attempts of an execution retried ten minutes later, and counts the ten minutes as waiting', () => {
    const execution = { status: 'completed' as const, started_at: at(0), completed_at: at(10 * MIN + 38_018) };
    const attempts = [attempt(1, 0, 15, 'retrying'), attempt(2, 10 * MIN + 38_000, 10 * MIN + 38_018)];
    const times = runTimes(execution, attempts, [step(0, 'step', 2, 12)], T0 + 20 * MIN);
    expect(times.attempts.map((a) => [a.attempt, a.state, a.runningMs])).toEqual([
      [1, 'ended', 15],
      [2, 'ended', 18],
    ]);
    expect(times).toMatchObject({ runningMs: 33, elapsedMs: 10 * MIN + 38_018, waitingMs: 10 * MIN + 38_018 - 33 });
  });

  it('stops the run time of a waiting execution where its wait began: it does not grow while it waits', () => {
    const execution = { status: 'waiting' as const, started_at: at(0), completed_at: null };
    const attempts = [attempt(1, 0, null)];
    const steps = [step(0, 'step', 1, 9), step(1, 'event', 10, null)];
    const early = runTimes(execution, attempts, steps, T0 + 1000);
    const later = runTimes(execution, attempts, steps, T0 + 30 * MIN);
    expect(early.attempts[0]).toEqual({ attempt: 1, state: 'suspended', runningMs: 10, spanMs: 10 });
    expect(later.attempts[0]).toEqual(early.attempts[0]);
    expect(later.runningMs).toBe(10);
    // The waiting grows instead.
    expect(later.waitingMs).toBe(30 * MIN - 10);
  });

  it('takes the waits out of an attempt that suspended and resumed as the same attempt', () => {
    const execution = { status: 'completed' as const, started_at: at(0), completed_at: at(10 * MIN + 30) };
    const attempts = [attempt(1, 0, 10 * MIN + 30)];
    const steps = [step(0, 'step', 0, 10), step(1, 'sleep', 10, 5 * MIN), step(2, 'event', 5 * MIN + 5, 10 * MIN + 20), step(3, 'step', 10 * MIN + 20, 10 * MIN + 30)];
    const times = runTimes(execution, attempts, steps, T0 + 60 * MIN);
    // 10 ms before the sleep, 5 ms between the sleep and the wait, 10 ms after it.
    expect(times.runningMs).toBe(25);
    expect(times.attempts[0].spanMs).toBe(10 * MIN + 30);
  });

  it("takes a step's retry delay out, and counts a running attempt up to now", () => {
    const execution = { status: 'running' as const, started_at: at(0), completed_at: null };
    const retried = step(0, 'step', 0, null, {
      wake_at: at(2 * MIN),
      failed_attempts: [{ attempt: 1, error: { type: 'Error', message: 'boom', retryable: true }, started_at: at(0), ended_at: at(20) }],
    });
    const times = runTimes(execution, [attempt(1, 0, null)], [retried], T0 + 2 * MIN + 50);
    expect(times.attempts[0]).toMatchObject({ state: 'running', runningMs: 20 + 50 });
  });

  it('counts a step that failed, then completed when the execution was retried, in both attempts', () => {
    const execution = { status: 'completed' as const, started_at: at(0), completed_at: at(10 * MIN + 20) };
    const attempts = [attempt(1, 0, 30, 'failed'), attempt(2, 10 * MIN, 10 * MIN + 20)];
    const error = { type: 'Error', message: 'declined', retryable: false };
    const steps = [
      step(0, 'step', 0, 10),
      step(1, 'step', 10, 10 * MIN + 15, { failed_attempts: [{ attempt: 1, error, started_at: at(10), ended_at: at(30) }] }),
    ];
    const times = runTimes(execution, attempts, steps, T0 + 60 * MIN);
    expect(times.attempts.map((a) => a.runningMs)).toEqual([30, 20]);
    expect(times).toMatchObject({ runningMs: 50, waitingMs: 10 * MIN + 20 - 50 });
  });

  it('has no run time before a worker claimed it', () => {
    const times = runTimes({ status: 'pending', started_at: null, completed_at: null }, [], [], T0);
    expect(times).toEqual({ attempts: [], runningMs: 0, waitingMs: 0, elapsedMs: null });
  });
});
