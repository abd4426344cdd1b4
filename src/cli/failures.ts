/**
 * How the operator commands end: the exit codes, and the one line on stderr that each failure gets
 * (never a stack). Scripts tell "the server said no" from "wrong arguments" from "no server" by code.
 */
import { StepwiseApiError } from '../client';

/** The operator commands' exit codes; `stepwise --help` lists them. */
export const EXIT = Object.freeze({
  ok: 0,
  /** The server answered with an error (the envelope's status and code are printed). */
  apiError: 1,
  /** A bulk action's confirmation was answered no (or not at all): nothing was changed. */
  declined: 1,
  /** Bad arguments, options or JSON input; nothing was sent. */
  usage: 2,
  /** The server could not be reached (refused, unknown host, timed out, TLS). */
  unreachable: 3,
  /** `executions wait` and `watch`: the execution failed. */
  failed: 4,
  /** `executions wait` and `watch`: the execution was cancelled. */
  cancelled: 5,
  /** `executions wait`: --timeout passed before the execution ended. */
  timedOut: 6,
});

/** The exit codes as `stepwise --help` shows them. */
export const EXIT_CODES_HELP = `
Exit codes of the operator commands (executions, events, tasks, workers, webhooks):
  0  done (for "executions wait" and "watch": the execution completed)
  1  the server answered with an error, printed as "stepwise: <status> <code>: <message>",
     or a bulk action was not confirmed (nothing was changed)
  2  usage: bad arguments, options or JSON input, or a bulk action without a filter or --yes
  3  the server cannot be reached at --url
  4  "executions wait" and "watch": the execution failed
  5  "executions wait" and "watch": the execution was cancelled
  6  "executions wait": --timeout passed first`;

/** A mistake in the command line or its input, found before anything is sent. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** A command that ran but ends with a non-zero code and a message, such as a wait that saw a failure. */
export class OutcomeError extends Error {
  override readonly name = 'OutcomeError';
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

/** The system error code under fetch's "fetch failed" TypeError (ECONNREFUSED, ENOTFOUND, …). */
function networkCause(err: TypeError): string | undefined {
  let cause: unknown = err.cause;
  for (let depth = 0; cause && depth < 4; depth += 1) {
    const { code, message } = cause as { code?: unknown; message?: unknown };
    if (typeof code === 'string') return code;
    if (typeof message === 'string' && message) return message;
    cause = (cause as { cause?: unknown }).cause;
  }
  return undefined;
}

function describeApiError(err: StepwiseApiError, url: string): string {
  if (err.code === 'unexpected_response') {
    return `${err.status} from ${url}: not a Stepwise API answer (check --url and its base path)`;
  }
  const details = err.details?.length ? ` (${err.details.map((d) => `${d.path}: ${d.message}`).join('; ')})` : '';
  const hint = err.code === 'unauthorized' ? ' (set --token or STEPWISE_TOKEN)' : '';
  return `${err.status} ${err.code}: ${err.message}${details}${hint}`;
}

/** The line (without the `stepwise: ` prefix) and exit code for anything an operator command threw. */
export function describeFailure(err: unknown, url: string): { line: string; exitCode: number } {
  if (err instanceof StepwiseApiError) return { line: describeApiError(err, url), exitCode: EXIT.apiError };
  if (err instanceof UsageError) return { line: err.message, exitCode: EXIT.usage };
  if (err instanceof OutcomeError) return { line: err.message, exitCode: err.exitCode };
  // fetch reports every network failure as a TypeError whose cause says what happened.
  if (err instanceof TypeError && err.message === 'fetch failed') {
    const cause = networkCause(err);
    return { line: `cannot reach the Stepwise server at ${url}${cause ? ` (${cause})` : ''}`, exitCode: EXIT.unreachable };
  }
  // openapi-fetch parses a 2xx body as JSON: a SyntaxError means something else answered.
  if (err instanceof SyntaxError) return { line: `the answer from ${url} is not JSON: is it a Stepwise server?`, exitCode: EXIT.apiError };
  const message = err instanceof Error ? err.message : String(err);
  return { line: `unexpected error: ${message}`, exitCode: EXIT.apiError };
}
