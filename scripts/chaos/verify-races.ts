// The race checks of `make chaos`: in `Promise.race` of durable operations the branch that fired first
// won (an event delivered well before the timer, the timer when none came, the shorter sleep) at its
// own time, not the loser's; losers and superseded waits were closed, none left open; and a reminder's
// acknowledged approval reached the round open then, never lost. Outputs and steps are checked with
// every other kind's in verify.ts, and each `remind` step's runs with every step's side effects.
import { isDeepStrictEqual } from 'node:util';
import type { DrivenResult } from './driver';
import { approvalPayload, goPayload, nthName, type PlannedExecution } from './outcomes';

type Violate = (kind: string, message: string) => void;

/** What the checks need of a history row (stepwise.steps). */
export interface RaceStepRow {
  name: string;
  kind: string;
  completed: boolean;
  outcome: string | null;
  result: { run?: string; value?: unknown; payload?: unknown } | null;
  wake_at: Date | null;
  completed_at: Date | null;
}

export interface RaceExecutionRow {
  id: string;
  status: string;
  output: unknown;
  completed_at: Date | null;
}

export interface RaceCounts {
  /** Completed executions checked, by kind. */
  checked: Record<string, number>;
  /** `race-event-timer` won by the event / by the timer. */
  eventWins: number;
  timerWins: number;
  /** Reminder approvals acknowledged (200), and those that reached a later round than planned (a fault held the driver up: allowed). */
  approvalsAcked: number;
  approvalsLate: number;
  /** A few of them: the execution, the planned round, the round open when the driver sent, the round reached, the answer's time. */
  lateExamples: string[];
  /** Waits closed when another won or a later round superseded them. */
  closedWaits: number;
}

export const newRaceCounts = (): RaceCounts => ({ checked: {}, eventWins: 0, timerWins: 0, approvalsAcked: 0, approvalsLate: 0, lateExamples: [], closedWaits: 0 });

/** The round a reminder's approval reached: the position of its completed `approval` wait, if any. */
export function approvedRound(rows: readonly RaceStepRow[]): number | undefined {
  const waits = rows.filter((r) => r.kind === 'event' && (r.name === 'approval' || r.name.startsWith('approval#')));
  const done = waits.find((w) => w.completed);
  if (!done) return undefined;
  return done.name === 'approval' ? 1 : Number(done.name.slice('approval#'.length));
}

/**
 * The plan as it landed: a reminder whose approval reached a later round than planned (the driver was
 * held up by a fault and the round's grace ran out) is expected to end in that round. An earlier one
 * is not moved (the driver never delivers before its round), so it fails the output check.
 */
export function asLanded(plan: PlannedExecution, rows: readonly RaceStepRow[]): PlannedExecution {
  if (plan.kind !== 'reminder') return plan;
  const round = approvedRound(rows);
  return round !== undefined && round > (plan.approvalRound ?? 1) ? { ...plan, approvalRound: round } : plan;
}

const ms = (d: Date | null | undefined) => d?.getTime() ?? NaN;
const iso = (d: Date | null | undefined) => d?.toISOString() ?? 'null';
const closed = (r: RaceStepRow | undefined) => r !== undefined && !r.completed && r.outcome === 'cancelled';
const show = (r: RaceStepRow | undefined) => (r ? `${r.kind} completed ${r.completed} outcome ${r.outcome} ended ${iso(r.completed_at)}` : 'not recorded');

/** Checks one execution of a race kind (`plan` as planned, `rows` its history). */
export function verifyRace(plan: PlannedExecution, e: RaceExecutionRow, rows: readonly RaceStepRow[], driven: DrivenResult | undefined, counts: RaceCounts, violate: Violate): void {
  const named = (name: string) => rows.find((r) => r.name === name);
  // An acknowledged approval is never lost, however the execution ended.
  if (plan.kind === 'reminder' && driven?.approval?.acked) {
    counts.approvalsAcked += 1;
    const output = e.output as { approved?: unknown } | null;
    if (e.status !== 'completed' || !isDeepStrictEqual(output?.approved, approvalPayload(plan.data))) {
      violate('delivery-lost', `${e.id} (reminder) got its approval answered 200 in round ${driven.approval.seenRound}, but ended ${e.status} with ${JSON.stringify(e.output)}`);
    }
  }
  if (e.status !== 'completed') return;
  counts.checked[plan.kind] = (counts.checked[plan.kind] ?? 0) + 1;
  // Whatever won, no wait is left open once the handler ended: each completed or was closed.
  for (const r of rows) {
    if ((r.kind === 'event' || r.kind === 'sleep') && !r.completed && r.outcome === null) violate('open-wait-left', `${e.id} (${plan.kind}) ${r.kind} ${r.name} is still open after the execution completed`);
    if (closed(r)) counts.closedWaits += 1;
  }
  const end = ms(e.completed_at);

  if (plan.kind === 'race-event-timer') {
    const go = named('go');
    const timer = named('timer');
    // Never as late as the event wait's minute (its wake_at): whichever branch won, it won in time.
    if (!(end < ms(go?.wake_at))) violate('race-late', `${e.id} (race-event-timer) completed ${iso(e.completed_at)}, not before the event wait's timeout ${iso(go?.wake_at)}`);
    if (plan.deliverGo) {
      counts.eventWins += 1;
      if (!go?.completed || !isDeepStrictEqual(go.result?.payload, goPayload(plan.data))) violate('race-winner', `${e.id} (race-event-timer) event go: ${show(go)}, payload ${JSON.stringify(go?.result?.payload)}; expected it delivered`);
      if (!closed(timer)) violate('race-loser', `${e.id} (race-event-timer) timer: ${show(timer)}; expected closed once go won`);
      if (!(end < ms(timer?.wake_at))) violate('race-late', `${e.id} (race-event-timer) completed ${iso(e.completed_at)}, after the losing timer's time ${iso(timer?.wake_at)}`);
    } else {
      counts.timerWins += 1;
      if (!timer?.completed || !(ms(timer.completed_at) >= ms(timer.wake_at))) violate('race-winner', `${e.id} (race-event-timer) timer: ${show(timer)}, wake_at ${iso(timer?.wake_at)}; expected completed at its time`);
      if (!closed(go)) violate('race-loser', `${e.id} (race-event-timer) event go: ${show(go)}; expected closed once the timer won`);
      if (!(end >= ms(timer?.wake_at))) violate('race-early', `${e.id} (race-event-timer) completed ${iso(e.completed_at)}, before its timer's time ${iso(timer?.wake_at)}`);
    }
  }

  if (plan.kind === 'race-timers') {
    const short = named('short');
    const long = named('long');
    if (!short?.completed || !(ms(short.completed_at) >= ms(short.wake_at))) violate('race-winner', `${e.id} (race-timers) short: ${show(short)}, wake_at ${iso(short?.wake_at)}; expected completed at its time`);
    if (!closed(long)) violate('race-loser', `${e.id} (race-timers) long: ${show(long)}; expected closed once short won`);
    if (!(end >= ms(short?.wake_at) && end < ms(long?.wake_at))) violate('race-late', `${e.id} (race-timers) completed ${iso(e.completed_at)}; short's time ${iso(short?.wake_at)}, long's ${iso(long?.wake_at)}`);
  }

  if (plan.kind === 'reminder') {
    const round = approvedRound(rows);
    const planned = plan.approvalRound ?? 1;
    const seen = driven?.approval?.seenRound;
    if (round === undefined) {
      violate('reminder-round', `${e.id} (reminder) completed with no approval wait completed`);
      return;
    }
    // Never before the round the driver saw open when it sent the approval (nor the planned one).
    if (round < planned || (seen !== undefined && round < seen)) violate('reminder-round', `${e.id} (reminder) approval reached round ${round}; planned ${planned}, open when sent ${seen}`);
    if (round > planned) {
      counts.approvalsLate += 1;
      if (counts.lateExamples.length < 5) counts.lateExamples.push(`${e.id}: planned ${planned}, open when sent ${seen}, reached ${round} (answered after ${driven?.approval?.sendMs} ms)`);
    }
    const waits = rows.filter((r) => r.kind === 'event');
    if (waits.length !== round) violate('reminder-round', `${e.id} (reminder) opened ${waits.length} approval waits, approved in round ${round}`);
    for (let r = 1; r <= round; r++) {
      const wait = named(nthName('approval', r));
      const grace = named(nthName('grace', r));
      if (r < round) {
        // A round that passed: its grace ran out at its time, its wait was superseded by the next
        // round's, its reminder recorded the round.
        if (!closed(wait)) violate('reminder-wait', `${e.id} (reminder) round ${r} approval: ${show(wait)}; expected closed by round ${r + 1}`);
        if (!grace?.completed || !(ms(grace.completed_at) >= ms(grace.wake_at))) violate('reminder-wait', `${e.id} (reminder) round ${r} grace: ${show(grace)}, wake_at ${iso(grace?.wake_at)}; expected completed at its time`);
        const remind = named(nthName('remind', r));
        const value = (remind?.result as { value?: unknown } | null)?.value;
        if (!remind?.completed || value !== r) violate('reminder-step', `${e.id} (reminder) ${nthName('remind', r)}: ${show(remind)} with value ${JSON.stringify(value)}; expected round ${r}'s`);
      } else {
        if (!wait?.completed || !isDeepStrictEqual(wait.result?.payload, approvalPayload(plan.data))) violate('reminder-wait', `${e.id} (reminder) round ${r} approval: ${show(wait)}, payload ${JSON.stringify(wait?.result?.payload)}`);
        // The grace of the approved round ran out after the approval, or was closed with the handler.
        if (grace?.completed && !(ms(grace.completed_at) > ms(wait?.completed_at))) violate('reminder-wait', `${e.id} (reminder) round ${r} grace ended ${iso(grace.completed_at)}, before the approval that won ${iso(wait?.completed_at)}`);
      }
    }
  }
}
