/** Pure: turns an execution and its recorded steps into the rows the detail page draws. No DOM. */
import type { Execution, Step } from '../client';

export type TimelineKind = Step['kind'];

/** One row of the timeline: a step, a sleep or an event wait, placed on the execution's time span. */
export interface TimelineEntry {
  seq: number;
  name: string;
  kind: TimelineKind;
  /**
   * `completed`; `failed` (a step whose retries ran out); still in progress (`running` step,
   * `sleeping`, `waiting` for an event or a child); or `interrupted`, left open when its execution
   * ended (cancelled, or failed elsewhere).
   */
  state: 'completed' | 'failed' | 'running' | 'sleeping' | 'waiting' | 'interrupted';
  startedMs: number;
  /** When it finished, or null while in progress. */
  endedMs: number | null;
  /** Its length so far: completed minus started, or up to now (or to the execution's end). */
  durationMs: number;
  /** The planned end of a sleep, or the timeout of an event wait. */
  deadlineMs: number | null;
  /** Position of the bar on the span, in percent of its length (0-100). */
  offsetPct: number;
  widthPct: number;
  /** For an event wait that finished: whether it timed out rather than receiving the event. */
  timedOut: boolean;
  result: unknown;
  /** A failed step's error; for a step still being retried, its last failure's. */
  error: { type: string; message: string } | null;
  /** How many attempts of the step failed (a completed step may have failed before). */
  failures: number;
}

export interface Timeline {
  entries: TimelineEntry[];
  /** The span the bars are drawn on: from the first start to the execution's end (or now). */
  startMs: number;
  endMs: number;
}

type ExecutionTimes = Pick<Execution, 'created_at' | 'started_at' | 'completed_at' | 'status'>;

function entryState(step: Step, executionEnded: boolean): TimelineEntry['state'] {
  if (step.status === 'completed' || step.status === 'failed') return step.status;
  if (executionEnded || step.status === 'cancelled') return 'interrupted';
  if (step.kind === 'sleep') return 'sleeping';
  if (step.kind === 'event' || step.kind === 'child') return 'waiting';
  return 'running';
}

function isTimedOut(step: Step): boolean {
  const r = step.result as { timed_out?: unknown } | null;
  return step.kind === 'event' && step.status === 'completed' && r !== null && typeof r === 'object' && r.timed_out === true;
}

function lastError(step: Step): TimelineEntry['error'] {
  const error = step.error ?? (step.status === 'completed' ? null : step.failed_attempts.at(-1)?.error);
  return error ? { type: error.type, message: error.message } : null;
}

/**
 * The timeline of `steps` in call order. An unfinished step lasts until now, or until the execution
 * ended (a cancelled execution leaves its wait unfinished, and that wait must not keep growing).
 * Bars share one span, from the execution's first start to its end or now, so gaps between bars show
 * the time the handler spent between durable operations, or queued for a worker.
 */
export function buildTimeline(execution: ExecutionTimes, steps: readonly Step[], nowMs: number): Timeline {
  const endedMs = execution.completed_at ? Date.parse(execution.completed_at) : null;
  const until = endedMs ?? nowMs;
  const sorted = [...steps].sort((a, b) => a.seq - b.seq);
  const starts = sorted.map((s) => Date.parse(s.started_at));
  const startMs = Math.min(Date.parse(execution.started_at ?? execution.created_at), ...starts);
  const lastEnd = Math.max(until, ...sorted.map((s) => (s.completed_at ? Date.parse(s.completed_at) : 0)));
  const span = Math.max(1, lastEnd - startMs);
  const entries = sorted.map((step, i): TimelineEntry => {
    const started = starts[i];
    const ended = step.completed_at ? Date.parse(step.completed_at) : null;
    const duration = Math.max(0, (ended ?? until) - started);
    return {
      seq: step.seq,
      name: step.name,
      kind: step.kind,
      state: entryState(step, endedMs !== null),
      startedMs: started,
      endedMs: ended,
      durationMs: duration,
      deadlineMs: step.wake_at ? Date.parse(step.wake_at) : null,
      offsetPct: ((started - startMs) / span) * 100,
      // A zero-length bar would vanish; half a percent keeps it visible.
      widthPct: Math.max(0.5, (duration / span) * 100),
      timedOut: isTimedOut(step),
      result: step.result,
      error: lastError(step),
      failures: step.failed_attempts.length,
    };
  });
  return { entries, startMs, endMs: lastEnd };
}

/** What an unfinished execution is waiting for, in words the detail page shows above the timeline. */
export type WaitDescription =
  | { kind: 'event'; eventName: string; sinceMs: number; timeoutMs: number | null }
  | { kind: 'sleep'; name: string; untilMs: number | null }
  | { kind: 'child'; name: string; childId: string }
  | { kind: 'retry'; attempt: number; reason: string }
  | { kind: 'scheduled'; startMs: number }
  | { kind: 'queued'; sinceMs: number }
  | { kind: 'running'; step: string | null };

/** Null for finished executions; otherwise what holds this one up, and until when (as of `nowMs`). */
export function describeWait(
  execution: Pick<Execution, 'status' | 'waiting_for_event' | 'created_at' | 'start_at' | 'attempt' | 'error' | 'current_step'>,
  steps: readonly Step[],
  nowMs: number,
): WaitDescription | null {
  switch (execution.status) {
    case 'waiting': {
      const w = execution.waiting_for_event;
      if (w) return { kind: 'event', eventName: w.event_name, sinceMs: Date.parse(w.since), timeoutMs: w.timeout_at ? Date.parse(w.timeout_at) : null };
      const child = steps.find((s) => s.kind === 'child' && s.status === 'in_progress' && s.name === execution.current_step);
      const childId = (child?.result as { execution_id?: unknown } | null)?.execution_id;
      if (child && typeof childId === 'string') return { kind: 'child', name: child.name, childId };
      const sleep = [...steps].reverse().find((s) => s.kind === 'sleep' && s.status === 'in_progress');
      return { kind: 'sleep', name: sleep?.name ?? execution.current_step ?? 'sleep', untilMs: sleep?.wake_at ? Date.parse(sleep.wake_at) : null };
    }
    case 'pending':
      if (execution.attempt > 0 && execution.error) return { kind: 'retry', attempt: execution.attempt, reason: execution.error.message };
      if (execution.start_at !== null) {
        const startMs = Date.parse(execution.start_at);
        if (startMs > nowMs) return { kind: 'scheduled', startMs };
        return { kind: 'queued', sinceMs: Math.max(startMs, Date.parse(execution.created_at)) };
      }
      return { kind: 'queued', sinceMs: Date.parse(execution.created_at) };
    case 'running':
      return { kind: 'running', step: execution.current_step };
    default:
      return null;
  }
}
