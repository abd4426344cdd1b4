import { ACTIVE_STATUSES, canTransition, type ExecutionStatus } from '../../domain/status';

/**
 * A status change one statement makes: the statuses its WHERE accepts and the statuses its SET may
 * write. Every statement that changes an execution's status lives in this folder, named by its move,
 * and writes its status conditions with `statusIn(move.from)` and `move.to`, so the SQL says what
 * the move declares; a test checks every move against domain/status.ts.
 */
export interface Move {
  readonly name: string;
  readonly from: readonly ExecutionStatus[];
  readonly to: readonly ExecutionStatus[];
}

/** Declares a move; one the transition table of domain/status.ts forbids fails when the module loads. */
function move(name: string, from: readonly ExecutionStatus[], to: readonly ExecutionStatus[]): Move {
  for (const f of from) for (const t of to) if (!canTransition(f, t)) throw new Error(`the ${name} move would take an execution from ${f} to ${t}`);
  return Object.freeze({ name, from: Object.freeze([...from]), to: Object.freeze([...to]) });
}

/** A worker takes a due execution: new, resumed after a pause, or taken over from an expired lease. */
export const CLAIM = move('claim', ['pending', 'waiting', 'running'], ['running']);
/** The handler returned and its output is recorded. */
export const COMPLETE = move('complete', ['running'], ['completed']);
/** The attempt failed: for good, or back to pending until its retry is due. */
export const FAIL = move('fail', ['running'], ['failed', 'pending']);
/** A worker shutting down hands back what it holds. */
export const RELEASE = move('release', ['running'], ['pending']);
/** A claim whose handler never started is undone: back to the status it had. */
export const RETURN_UNSTARTED = move('return unstarted', ['running'], ['pending', 'waiting']);
/** The handler pauses durably: a sleep, an event wait, a child wait. */
export const SUSPEND = move('suspend', ['running'], ['waiting']);
/** A client (or a cancelled ancestor) cancels it. */
export const CANCEL = move('cancel', ACTIVE_STATUSES, ['cancelled']);

/** An operator retries a failed or cancelled execution from where it stopped. */
export const RETRY = move('retry', ['failed', 'cancelled'], ['pending']);

export const MOVES: readonly Move[] = Object.freeze([CLAIM, COMPLETE, FAIL, RELEASE, RETURN_UNSTARTED, SUSPEND, CANCEL, RETRY]);

function sqlStatus(status: ExecutionStatus): string {
  return `'${status}'`;
}

/** `<column> IN (...)` over the statuses, for a condition that reads a status. */
export function statusIn(statuses: readonly ExecutionStatus[], column = 'status'): string {
  return statuses.length === 1 ? `${column} = ${sqlStatus(statuses[0])}` : `${column} IN (${statuses.map(sqlStatus).join(', ')})`;
}

/** The condition of a move's statement: the row is in one of the statuses the move starts from. */
export function startsFrom(m: Move, column = 'status'): string {
  return statusIn(m.from, column);
}

/** The SQL literal of a status the move writes; one it does not declare throws when the module loads. */
export function writes(m: Move, status: ExecutionStatus): string {
  if (!m.to.includes(status)) throw new Error(`the ${m.name} move does not write status ${status}`);
  return sqlStatus(status);
}
