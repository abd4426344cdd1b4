import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from '../../generated/openapi';
import { DatabaseUnavailableError } from '../store/db-errors';

type Schemas = components['schemas'];
export type ItemError = Schemas['WorkerItemError'];

/**
 * The API server could not be reached, or answered 5xx: the remote worker's equivalent of a database
 * outage. It is one (DatabaseUnavailableError), so the engine waits it out as it would an outage,
 * until the lease's end.
 */
export class RemoteUnavailableError extends DatabaseUnavailableError {
  constructor(cause: unknown) {
    super(cause);
    this.name = 'RemoteUnavailableError';
    this.message = `the API server is unavailable: ${cause instanceof Error ? cause.message : String(cause)}`.slice(0, 500);
  }
}

/** An answer the worker cannot go on from (401, 403, a body the server refused): a bug or a setup error, not an outage. */
export class RemoteRequestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
    this.name = 'RemoteRequestError';
  }
}

/** The worker protocol's paths that take a JSON body by POST. */
export type WorkerPath = Extract<keyof paths, `/api/v1/worker/${string}`>;
type PostOf<P extends WorkerPath> = paths[P]['post'];
export type BodyOf<P extends WorkerPath> = PostOf<P>['requestBody']['content']['application/json'];
export type AnswerOf<P extends WorkerPath> = PostOf<P>['responses'][200]['content']['application/json'];

/**
 * HTTP to one API server's worker protocol, with the worker's token. Every failure to get an answer,
 * and every 5xx, is RemoteUnavailableError; any other error answer is RemoteRequestError.
 */
export class WorkerTransport {
  private readonly client: Client<paths>;

  constructor(options: { url: string; token?: string; fetch?: typeof fetch }) {
    const headers: Record<string, string> = options.token ? { Authorization: `Bearer ${options.token}` } : {};
    this.client = createClient<paths>({ baseUrl: options.url.replace(/\/+$/, ''), headers, fetch: options.fetch });
  }

  async post<P extends WorkerPath>(path: P, body: BodyOf<P>, signal?: AbortSignal): Promise<AnswerOf<P>> {
    let answer: { data?: unknown; error?: unknown; response: Response };
    try {
      // The client's generic signature is per path: the call is typed by the aliases above instead.
      answer = await (this.client.POST as (p: string, init: unknown) => Promise<{ data?: unknown; error?: unknown; response: Response }>)(path, { body, signal });
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err;
      throw new RemoteUnavailableError(err);
    }
    const { response } = answer;
    if (response.ok) return answer.data as AnswerOf<P>;
    const envelope = answer.error as { error?: { code?: string; message?: string } } | undefined;
    const what = `${path} answered ${response.status}${envelope?.error?.message ? `: ${envelope.error.message}` : ''}`;
    if (response.status >= 500 || response.status === 429) throw new RemoteUnavailableError(new Error(what));
    throw new RemoteRequestError(response.status, envelope?.error?.code, what);
  }
}

/** True for an item the server refused because its lease does not hold. */
export const isLeaseLost = (r: { status: number }): boolean => r.status === 409 && (r as ItemError).error?.code === 'lease_lost';
