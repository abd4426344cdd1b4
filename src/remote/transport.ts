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
 * HTTP to the worker protocol of an API server, with the worker's token. `url` may list several
 * servers, comma-separated: requests go to one until it cannot be reached (or answers 5xx), then to
 * the next. Every failure to get an answer, and every 5xx, is RemoteUnavailableError; any other
 * error answer is RemoteRequestError.
 */
export class WorkerTransport {
  private readonly clients: Array<Client<paths>>;
  private current = 0;

  constructor(options: { url: string; token?: string; fetch?: typeof fetch }) {
    const headers: Record<string, string> = options.token ? { Authorization: `Bearer ${options.token}` } : {};
    const urls = options.url.split(',').map((u) => u.trim().replace(/\/+$/, '')).filter((u) => u !== '');
    if (urls.length === 0) throw new TypeError('a remote worker needs the URL of an API server');
    this.clients = urls.map((baseUrl) => createClient<paths>({ baseUrl, headers, fetch: options.fetch }));
  }

  async post<P extends WorkerPath>(path: P, body: BodyOf<P>, signal?: AbortSignal): Promise<AnswerOf<P>> {
    const at = this.current;
    let answer: { data?: unknown; error?: unknown; response: Response };
    try {
      // The client's generic signature is per path: the call is typed by the aliases above instead.
      answer = await (this.clients[at].POST as (p: string, init: unknown) => Promise<{ data?: unknown; error?: unknown; response: Response }>)(path, { body, signal });
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err;
      this.next(at);
      throw new RemoteUnavailableError(err);
    }
    const { response } = answer;
    if (response.ok) return answer.data as AnswerOf<P>;
    const envelope = answer.error as { error?: { code?: string; message?: string } } | undefined;
    const what = `${path} answered ${response.status}${envelope?.error?.message ? `: ${envelope.error.message}` : ''}`;
    if (response.status >= 500 || response.status === 429) {
      this.next(at);
      throw new RemoteUnavailableError(new Error(what));
    }
    throw new RemoteRequestError(response.status, envelope?.error?.code, what);
  }

  /** The server at `failed` is away: the next request goes to the next one (the caller retries). */
  private next(failed: number): void {
    if (this.current === failed) this.current = (failed + 1) % this.clients.length;
  }
}

/** True for an item the server refused because its lease does not hold. */
export const isLeaseLost = (r: { status: number }): boolean => r.status === 409 && (r as ItemError).error?.code === 'lease_lost';
