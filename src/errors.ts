/**
 * The error vocabulary shared by HTTP responses and logs. Codes are the snake_case strings of
 * openapi.yaml's ErrorCode enum; one middleware (api/error-middleware.ts) turns them into the envelope.
 */
export type ErrorCode =
  | 'invalid_json'
  | 'invalid_data'
  | 'unauthorized'
  | 'execution_not_found'
  | 'route_not_found'
  | 'method_not_allowed'
  | 'execution_already_exists'
  | 'execution_not_cancellable'
  | 'execution_not_retryable'
  | 'task_not_found'
  | 'not_waiting_for_event'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'task_not_registered'
  | 'service_unavailable'
  | 'internal_error'
  | 'forbidden'
  | 'webhook_not_found'
  | 'execution_not_upgradable'
  | 'task_version_not_served'
  // Answered outside Koa, to what Node's HTTP parser refused (api/malformed-requests.ts).
  | 'malformed_request'
  | 'request_header_too_large'
  | 'request_timeout'
  | 'lease_lost';

/** One failed check of a request, pointing at the offending location. */
export interface ErrorDetail {
  path: string;
  message: string;
}

/**
 * What an error tells a client beyond its code, in the envelope's own fields (see ErrorEnvelope in
 * openapi.yaml): why, and the state of the execution it is about, so that a client can tell an answer
 * to retry from a final one.
 */
export interface ErrorFacts {
  reason?: string;
  execution_status?: string;
  waiting_for?: string[];
}

/** Base class of every error the API may expose; anything else is reported as internal_error. */
export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly status: number,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
    readonly facts?: ErrorFacts,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class InvalidJsonError extends AppError {
  constructor(message = 'request body is not valid JSON') {
    super('invalid_json', 400, message);
  }
}

export class InvalidDataError extends AppError {
  constructor(message: string, details?: ErrorDetail[]) {
    super('invalid_data', 422, message, details);
  }
}

export class UnauthorizedError extends AppError {
  constructor() {
    super('unauthorized', 401, 'a valid bearer token is required', undefined, {
      'WWW-Authenticate': 'Bearer realm="stepwise"',
    });
  }
}

export class ExecutionNotFoundError extends AppError {
  constructor(id: string) {
    super('execution_not_found', 404, `execution ${JSON.stringify(id.slice(0, 100))} was not found`);
  }
}

export class RouteNotFoundError extends AppError {
  constructor(method: string, path: string) {
    super('route_not_found', 404, `no route for ${method} ${path.slice(0, 200)}`);
  }
}

export class MethodNotAllowedError extends AppError {
  constructor(method: string, allowed: string[]) {
    super('method_not_allowed', 405, `method ${method} is not allowed here`, undefined, {
      Allow: allowed.join(', '),
    });
  }
}

export class ExecutionAlreadyExistsError extends AppError {
  constructor(key: string, task: string) {
    super(
      'execution_already_exists',
      409,
      `idempotency key is already used by an execution of task ${JSON.stringify(task)}`,
    );
    void key;
  }
}

export class ExecutionNotCancellableError extends AppError {
  constructor(id: string, status: string) {
    super('execution_not_cancellable', 409, `execution ${id} is ${status} and cannot be cancelled`);
  }
}

export class ExecutionNotRetryableError extends AppError {
  constructor(id: string, status: string) {
    super('execution_not_retryable', 409, `execution ${id} is ${status} and cannot be retried; only a failed or cancelled one can`);
  }
}

export class ExecutionNotUpgradableError extends AppError {
  constructor(id: string, status: string, held: boolean) {
    const why = held ? 'running, and its worker holds it' : status;
    super('execution_not_upgradable', 409, `execution ${id} is ${why}; only a pending or waiting execution, or a running one whose worker is gone, can move to another version`);
  }
}

export class TaskVersionNotServedError extends AppError {
  constructor(task: string, version: string | null) {
    super('task_version_not_served', 409, `no live worker serves ${version === null ? 'the unversioned code' : `version ${JSON.stringify(version)}`} of task ${task}`);
  }
}

export class TaskNotFoundError extends AppError {
  constructor(name: string) {
    super('task_not_found', 404, `task ${JSON.stringify(name.slice(0, 255))} is not registered`);
  }
}

/** What an execution was doing when an event for it found no wait: its status and the events it waits for. */
export interface EventWaitState {
  status: string;
  waitingFor: readonly string[];
  /** It waited for this event when read, but the delivery found the wait taken (a concurrent delivery) or timed out. */
  missed?: boolean;
}

/** Seconds a client is asked to wait before it sends again an event that came before its wait. */
const EVENT_RETRY_AFTER_SECONDS = 1;

/** Why an event is too late for an execution, or meant for another wait: what it does instead. */
function whyNotWaiting(state: EventWaitState): string {
  if (state.missed) return `its wait was taken by another delivery or timed out, and it is ${state.status}`;
  if (state.status !== 'waiting') return `it is ${state.status}`;
  if (state.waitingFor.length === 0) return 'it waits for no event';
  const waits = state.waitingFor.slice(0, 20).map((n) => JSON.stringify(n.slice(0, 100)));
  const more = state.waitingFor.length > waits.length ? ` and ${state.waitingFor.length - waits.length} more` : '';
  return `it waits for ${waits.join(', ')}${more}`;
}

/**
 * An event that no open wait takes. The spec's one code and status serve two cases, told apart by
 * `reason`: `not_waiting_yet` while the execution is pending or running (a handler's waitForEvent is
 * recorded only when it suspends, so the wait may be about to open: retry after Retry-After), and
 * `not_waiting` once it waits for something else or has finished.
 */
export class NotWaitingForEventError extends AppError {
  constructor(id: string, eventName: string, state: EventWaitState) {
    const event = JSON.stringify(eventName.slice(0, 100));
    // A missed wait is too late, whatever the execution does since (a concurrent delivery resumed it).
    const early = !state.missed && (state.status === 'pending' || state.status === 'running');
    const why = early ? `it is ${state.status} and has not suspended on a wait yet; retry later` : whyNotWaiting(state);
    super(
      'not_waiting_for_event',
      409,
      `execution ${id} is not waiting for event ${event}${early ? ' yet' : ''}: ${why}`,
      undefined,
      early ? { 'Retry-After': String(EVENT_RETRY_AFTER_SECONDS) } : undefined,
      { reason: early ? 'not_waiting_yet' : 'not_waiting', execution_status: state.status, waiting_for: [...state.waitingFor] },
    );
  }
}

export class PayloadTooLargeError extends AppError {
  constructor(limit: number, what = 'request body') {
    super('payload_too_large', 413, `${what} exceeds the limit of ${limit} bytes`);
  }
}

export class UnsupportedMediaTypeError extends AppError {
  constructor(type: string | undefined) {
    super(
      'unsupported_media_type',
      415,
      `content type ${JSON.stringify((type ?? '').slice(0, 100))} is not supported; send application/json`,
    );
  }
}

/**
 * A task no worker has registered: the API's 422, and what schedule() throws when given a task's
 * name (exported from 'stepwise-workflows').
 */
export class TaskNotRegisteredError extends AppError {
  constructor(readonly task: string) {
    super('task_not_registered', 422, `task ${JSON.stringify(task.slice(0, 255))} is not registered: no worker serving it has started against this database`);
  }
}

/** Why a 503 `service_unavailable`: the database cannot be reached, or the server's connections to it are all busy. */
export type ServiceUnavailableReason = 'database_unavailable' | 'pool_saturated';

export class ServiceUnavailableError extends AppError {
  constructor(retryAfterSeconds = 2) {
    super('service_unavailable', 503, 'the database is unavailable; retry later', undefined, { 'Retry-After': String(retryAfterSeconds) }, { reason: 'database_unavailable' });
  }
}

/**
 * Every database connection of the server is in use while the database answers: the server is
 * saturated, not the database away. The same code as an outage (clients retry both alike), told
 * apart by `reason` and the message; Retry-After is short, as connections free up in milliseconds.
 */
export class ServerBusyError extends AppError {
  constructor(retryAfterSeconds = 1) {
    super('service_unavailable', 503, 'the server is busy: all of its database connections are in use; retry later', undefined, { 'Retry-After': String(retryAfterSeconds) }, { reason: 'pool_saturated' });
  }
}

/**
 * What a log line may say about an unexpected error: its type, its SQLSTATE when it came from
 * PostgreSQL, and its message without the SQL text knex prefixes to query errors. Never the stack.
 */
export function describeError(err: unknown): { errType: string; code?: string; message: string } {
  if (!(err instanceof Error)) return { errType: typeof err, message: String(err).slice(0, 500) };
  // The store's DatabaseUnavailableError is described by what it wraps: knex prefixes its SQL (and
  // bindings) to the message of the error it throws, the wrapper, never to the cause.
  if (err.name === 'DatabaseUnavailableError' && err.cause !== undefined) return { ...describeError(err.cause), errType: err.name };
  const raw = (err as unknown as { code?: unknown }).code;
  const code = typeof raw === 'string' ? raw : undefined;
  let message = err.message;
  // knex reports query errors as "<sql> - <postgres message>".
  if (code && message.includes(' - ')) message = message.slice(message.lastIndexOf(' - ') + 3);
  return { errType: err.name, ...(code ? { code } : {}), message: message.slice(0, 500) };
}

export class WebhookNotFoundError extends AppError {
  constructor(id: string) {
    super('webhook_not_found', 404, `webhook ${JSON.stringify(id.slice(0, 100))} was not found`);
  }
}

/** A request refused for where it came from (another site's page, a host name not allowed), not for what it asks. */
/** Why a known token was refused: the kind of token the operation needs (see ForbiddenError in openapi.yaml). */
export type ForbiddenReason = 'client_token_required' | 'worker_token_required' | 'metrics_token_required';

export class ForbiddenError extends AppError {
  constructor(message: string, reason?: ForbiddenReason) {
    super('forbidden', 403, message, undefined, undefined, reason === undefined ? undefined : { reason });
  }
}

/**
 * A worker's write whose lease no longer holds: the execution was cancelled, taken over, released or
 * finished, or the token never held it. Nothing was written (the worker protocol's per-item 409).
 */
export class LeaseLostError extends AppError {
  constructor(executionId: string) {
    super('lease_lost', 409, `the lease of execution ${executionId.slice(0, 100)} is not held by this token (cancelled, taken over, released or finished)`);
  }
}

/** A startup problem with a message meant for the operator, printed in one line (no stack). */
export class StartupError extends Error {
  override name = 'StartupError';
}
