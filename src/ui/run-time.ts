/**
 * Pure: how long an execution ran, told apart from how long it waited. An attempt's span runs from its
 * claim to its end, and includes every sleep, event or child wait and step retry delay inside it (a
 * suspended attempt resumes as the same attempt): those are taken out. No DOM.
 */
import type { Attempt, Execution, Step } from '../client';

/** What an attempt is doing: ended (its outcome says how), running now, suspended in a wait, or queued. */
export type AttemptState = 'ended' | 'running' | 'suspended' | 'queued';

export interface AttemptTime {
  attempt: number;
  state: AttemptState;
  /** Time the handler ran in this attempt, waits excluded; null when it never started. */
  runningMs: number | null;
  /** From its claim to its end, or to the start of the wait it is suspended in, or to now while running. */
  spanMs: number | null;
}

export interface RunTimes {
  attempts: AttemptTime[];
  /** The attempts' running times, summed. */
  runningMs: number;
  /** From the first start to the end (or now), less the running time: retry delays, waits, queueing. */
  waitingMs: number;
  /** From the first start to the end (or now); null before the first start. */
  elapsedMs: number | null;
}

type ExecutionTimes = Pick<Execution, 'status' | 'started_at' | 'completed_at'>;

interface Interval {
  start: number;
  end: number;
  /** Still going: a wait in progress. */
  open: boolean;
}

const parse = (iso: string | null | undefined): number | null => (iso ? Date.parse(iso) : null);

/**
 * The intervals in which no handler code ran though an attempt may have been open: sleeps, event and
 * child waits, and the delays between a step's failed tries and its next one.
 */
export function waitIntervals(steps: readonly Step[], nowMs: number): Interval[] {
  const intervals: Interval[] = [];
  for (const s of steps) {
    const started = Date.parse(s.started_at);
    const completed = parse(s.completed_at);
    if (s.kind === 'sleep' || s.kind === 'event' || s.kind === 'child') {
      intervals.push({ start: started, end: completed ?? nowMs, open: completed === null });
      continue;
    }
    const failures = [...s.failed_attempts].sort((a, b) => a.attempt - b.attempt);
    failures.forEach((f, i) => {
      const next = failures[i + 1];
      if (next) intervals.push({ start: Date.parse(f.ended_at), end: Date.parse(next.started_at), open: false });
    });
    // A step waiting for its next try: until its retry time (wake_at). Once it has completed, that time
    // is no longer recorded, and the delay before its last try counts as running.
    const last = failures.at(-1);
    const wake = parse(s.wake_at);
    if (last && s.status === 'in_progress' && wake !== null) {
      intervals.push({ start: Date.parse(last.ended_at), end: Math.min(wake, nowMs), open: wake > nowMs });
    }
  }
  return intervals.filter((w) => w.end > w.start);
}

/** Milliseconds of [from, to] that the intervals cover (overlaps counted once). */
function covered(intervals: readonly Interval[], from: number, to: number): number {
  const parts = intervals
    .map((w) => [Math.max(w.start, from), Math.min(w.end, to)] as const)
    .filter(([a, b]) => b > a)
    .sort((x, y) => x[0] - y[0]);
  let total = 0;
  let reach = from;
  for (const [a, b] of parts) {
    const start = Math.max(a, reach);
    if (b > start) total += b - start;
    reach = Math.max(reach, b);
  }
  return total;
}

/**
 * Where an attempt without an end stops counting: now while its execution runs; otherwise (waiting,
 * or pending again) the start of the wait it is suspended in, else its last recorded activity.
 */
function openAttemptEnd(execution: ExecutionTimes, startMs: number, steps: readonly Step[], waits: readonly Interval[], nowMs: number): number {
  if (execution.status === 'running') return nowMs;
  const open = waits.filter((w) => w.open && w.end >= startMs).map((w) => Math.max(startMs, w.start));
  if (open.length > 0) return Math.min(...open);
  const activity = steps
    .flatMap((s) => [Date.parse(s.started_at), parse(s.completed_at) ?? 0, ...s.failed_attempts.map((f) => Date.parse(f.ended_at))])
    .filter((t) => t >= startMs && t <= nowMs);
  return Math.max(startMs, ...activity);
}

function attemptState(a: Attempt, execution: ExecutionTimes): AttemptState {
  if (a.ended_at !== null) return 'ended';
  if (execution.status === 'running') return 'running';
  return execution.status === 'waiting' ? 'suspended' : 'queued';
}

/** Running and waiting time of an execution, per attempt and in all, as of `nowMs`. */
export function runTimes(execution: ExecutionTimes, attempts: readonly Attempt[], steps: readonly Step[], nowMs: number): RunTimes {
  const waits = waitIntervals(steps, nowMs);
  const times = attempts.map((a): AttemptTime => {
    const state = attemptState(a, execution);
    const start = parse(a.started_at);
    if (start === null) return { attempt: a.attempt, state, runningMs: null, spanMs: null };
    const end = Math.max(start, parse(a.ended_at) ?? openAttemptEnd(execution, start, steps, waits, nowMs));
    return { attempt: a.attempt, state, spanMs: end - start, runningMs: Math.max(0, end - start - covered(waits, start, end)) };
  });
  const runningMs = times.reduce((sum, t) => sum + (t.runningMs ?? 0), 0);
  const first = parse(execution.started_at);
  const elapsedMs = first === null ? null : Math.max(0, (parse(execution.completed_at) ?? nowMs) - first);
  return { attempts: times, runningMs, waitingMs: elapsedMs === null ? 0 : Math.max(0, elapsedMs - runningMs), elapsedMs };
}
