import type { Client } from 'openapi-fetch';
import type { components, paths } from '../../generated/openapi';
import { isTransientFailure, StepwiseApiError, toApiError } from './errors';
import { readServerSentEvents, type ServerSentEvent } from './event-stream';

type Execution = components['schemas']['Execution'];
type ExecutionChange = components['schemas']['ExecutionChange'];

/** What `watchChanges` yields: `sync` (re-read what you show: changes may have been missed) or one change. */
export type ExecutionChangesEvent = { type: 'sync' } | { type: 'changed'; change: ExecutionChange };

/** The reconnection delay until the server suggests one (`retry:`), and the most a reconnect waits. */
const FIRST_RETRY_MS = 1000;
const MAX_RETRY_MS = 5000;

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

type Opened = { data?: ReadableStream<Uint8Array> | null; error?: unknown; response: Response };

/**
 * Follows an event stream, connecting again whenever it drops (a network error, a 502/503/504, the
 * server ending it as it shuts down) after the server's `retry:` delay, doubled on each failure in a
 * row up to 5 s, with jitter. Any other error answer (401, 404) is thrown. `decode` turns an event
 * into an item (or skips it) and says whether it is the last. Ends quietly when `signal` aborts, and
 * closes the connection when the consumer stops early.
 */
async function* follow<T>(open: (signal: AbortSignal) => Promise<Opened>, decode: (e: ServerSentEvent) => { item: T; last: boolean } | undefined, signal?: AbortSignal): AsyncGenerator<T> {
  const local = new AbortController();
  const onAbort = () => local.abort();
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted) local.abort();
  let retryMs = FIRST_RETRY_MS;
  let failures = 0;
  try {
    while (!local.signal.aborted) {
      let hintMs = 0;
      try {
        const { data, error, response } = await open(local.signal);
        if (!response.ok || !data) throw toApiError(response, error);
        for await (const event of readServerSentEvents(data, (ms) => (retryMs = ms))) {
          const decoded = decode(event);
          if (!decoded) continue;
          failures = 0;
          yield decoded.item;
          if (decoded.last) return;
        }
      } catch (err) {
        if (local.signal.aborted) return;
        if (!isTransientFailure(err)) throw err;
        if (err instanceof StepwiseApiError && err.retryAfterSeconds !== undefined) hintMs = err.retryAfterSeconds * 1000;
      }
      failures += 1;
      const backoff = Math.min(MAX_RETRY_MS, retryMs * 2 ** (failures - 1));
      await pause(Math.max(hintMs, backoff * (0.5 + Math.random() / 2)), local.signal);
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    local.abort();
  }
}

const TERMINAL: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);

/** See the client's `watch`. */
export function watchExecution(raw: Client<paths>, id: string, signal?: AbortSignal): AsyncGenerator<Execution> {
  return follow(
    (s) => raw.GET('/api/v1/executions/{id}/stream', { params: { path: { id } }, parseAs: 'stream', signal: s }),
    (e) => {
      if (e.event !== 'execution') return undefined;
      const execution = JSON.parse(e.data) as Execution;
      return { item: execution, last: TERMINAL.has(execution.status) };
    },
    signal,
  );
}

/** See the client's `watchChanges`. */
export function watchExecutionChanges(raw: Client<paths>, task: string | undefined, signal?: AbortSignal): AsyncGenerator<ExecutionChangesEvent> {
  return follow<ExecutionChangesEvent>(
    (s) => raw.GET('/api/v1/executions/changes', { params: { query: task === undefined ? {} : { task } }, parseAs: 'stream', signal: s }),
    (e) => {
      if (e.event === 'sync') return { item: { type: 'sync' }, last: false };
      if (e.event === 'changed') return { item: { type: 'changed', change: JSON.parse(e.data) as ExecutionChange }, last: false };
      return undefined;
    },
    signal,
  );
}
