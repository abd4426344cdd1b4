import type { components } from '../../generated/openapi';

/** The error codes of openapi.yaml, plus `unexpected_response` for an answer that is not the envelope. */
export type StepwiseErrorCode = components['schemas']['ErrorCode'] | 'unexpected_response';

/** One failed check of a request, as the server reported it. */
export type StepwiseErrorDetail = components['schemas']['ErrorDetail'];

type Envelope = components['schemas']['ErrorEnvelope']['error'];

/** What an error answer says beyond its code and message (see ErrorEnvelope in openapi.yaml). */
export type StepwiseErrorFacts = Pick<Envelope, 'reason' | 'execution_status' | 'waiting_for'>;

/** An error answer from the Stepwise API, typed by its `code` and HTTP `status`. */
export class StepwiseApiError extends Error {
  override readonly name = 'StepwiseApiError';
  constructor(
    readonly code: StepwiseErrorCode,
    readonly status: number,
    message: string,
    readonly details?: StepwiseErrorDetail[],
    /** The server's X-Request-Id, to find the request in its logs. */
    readonly requestId?: string,
    /** Seconds the server asked to wait before retrying (503, and 409 `not_waiting_yet`). */
    readonly retryAfterSeconds?: number,
    /**
     * Why, for a code with several cases: `not_waiting_yet` (send the event again later) or
     * `not_waiting` for `not_waiting_for_event`; with the execution's status and the events it waits for.
     */
    readonly facts?: StepwiseErrorFacts,
  ) {
    super(message);
  }
}

/** `wait` reached its deadline while the execution was still running, pending or waiting. */
export class StepwiseWaitTimeoutError extends Error {
  override readonly name = 'StepwiseWaitTimeoutError';
  constructor(
    readonly executionId: string,
    /** The last status the server reported. */
    readonly lastStatus: string,
  ) {
    super(`execution ${executionId} is still ${lastStatus} at the wait deadline`);
  }
}

/** True for failures worth trying again after a pause: the server or its database is briefly away, or the network failed. */
export function isTransientFailure(err: unknown): boolean {
  if (err instanceof StepwiseApiError) return err.status === 503 || err.status === 502 || err.status === 504;
  // fetch's network failure, and a body cut off mid-way; by name, since the fetch in use may come from
  // another realm (a test runner's sandbox) whose TypeError is another class.
  return typeof err === 'object' && err !== null && (err as { name?: unknown }).name === 'TypeError';
}

function isEnvelope(value: unknown): value is components['schemas']['ErrorEnvelope'] {
  const error = (value as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  return typeof error?.code === 'string' && typeof error.message === 'string';
}

/** Turns a non-2xx answer (its parsed or raw body) into a StepwiseApiError. */
export function toApiError(response: Response, body: unknown): StepwiseApiError {
  const requestId = response.headers.get('X-Request-Id') ?? undefined;
  const retryAfter = Number.parseInt(response.headers.get('Retry-After') ?? '', 10);
  const retry = Number.isFinite(retryAfter) ? retryAfter : undefined;
  if (isEnvelope(body)) {
    const { reason, execution_status, waiting_for } = body.error;
    const facts = reason === undefined && execution_status === undefined && waiting_for === undefined ? undefined : { reason, execution_status, waiting_for };
    return new StepwiseApiError(body.error.code, response.status, body.error.message, body.error.details, requestId, retry, facts);
  }
  return new StepwiseApiError('unexpected_response', response.status, `unexpected HTTP ${response.status} answer`, undefined, requestId, retry);
}
