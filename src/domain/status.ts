/** The lifecycle of an execution, matching openapi.yaml's ExecutionStatus enum. */
export const EXECUTION_STATUSES = Object.freeze([
  'pending',
  'running',
  'waiting',
  'completed',
  'failed',
  'cancelled',
] as const);

export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];

export const TERMINAL_STATUSES: readonly ExecutionStatus[] = Object.freeze(['completed', 'failed', 'cancelled']);

/** The statuses an execution may still leave: pending, running, waiting. */
export const ACTIVE_STATUSES: readonly ExecutionStatus[] = Object.freeze(EXECUTION_STATUSES.filter((s) => !TERMINAL_STATUSES.includes(s)));

/** Legal moves of the state machine; the store's conditional updates follow this table. */
const TRANSITIONS: Readonly<Record<ExecutionStatus, readonly ExecutionStatus[]>> = Object.freeze({
  pending: ['running', 'cancelled'],
  // running -> pending is a retry or a release on shutdown; running -> running is a lease takeover.
  running: ['running', 'pending', 'waiting', 'completed', 'failed', 'cancelled'],
  waiting: ['running', 'cancelled'],
  completed: [],
  // An operator's retry puts a failed or cancelled execution back in the queue, its history kept.
  failed: ['pending'],
  cancelled: ['pending'],
});

export function isTerminal(status: ExecutionStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

export function canTransition(from: ExecutionStatus, to: ExecutionStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

/** Cancel is legal from every non-terminal status. */
export function isCancellable(status: ExecutionStatus): boolean {
  return canTransition(status, 'cancelled');
}
