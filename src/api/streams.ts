import type Router from '@koa/router';
import { isTerminal } from '../domain/status';
import { ExecutionNotFoundError, ServiceUnavailableError } from '../errors';
import type { ExecutionRecord } from '../store/rows';
import type { ApiDeps } from './deps';
import { EventStream } from './event-stream';
import type { ExecutionSubscriber } from './execution-waiters';
import { serializedState } from './serialized-states';
import type { ApiState } from './state';
import { addOperation } from './typed';

/**
 * One GET /executions/{id}/stream as a subscriber of the fan-out. Until the first read answers it is
 * opening (that read decides between 404 and the stream); then every read whose state differs from
 * the last one sent becomes an event, and the terminal one ends the stream.
 */
class ExecutionFollower implements ExecutionSubscriber {
  readonly kind = 'stream';
  /** The first read: the current state, or undefined for an unknown id. */
  readonly first: Promise<ExecutionRecord | undefined>;
  private resolveFirst!: (e: ExecutionRecord | undefined) => void;
  private rejectFirst!: (err: unknown) => void;
  private opened = false;
  private stream: EventStream | undefined;
  /** A state read while the stream could not take it (not open yet, or the client behind). */
  private held: ExecutionRecord | undefined;
  private lastId: string | undefined;

  constructor() {
    this.first = new Promise((resolve, reject) => {
      this.resolveFirst = resolve;
      this.rejectFirst = reject;
    });
  }

  /** Starts sending on `stream`, with the first state and whatever was read since. */
  open(stream: EventStream, current: ExecutionRecord): void {
    this.stream = stream;
    this.send(current);
    const held = this.held;
    this.held = undefined;
    if (held) this.send(held);
  }

  offer(execution: ExecutionRecord | undefined): void {
    if (!this.opened) {
      this.opened = true;
      this.resolveFirst(execution);
      return;
    }
    if (!this.stream) {
      this.held = execution ?? this.held;
      return;
    }
    // Gone: retention deleted it, which only happens to finished executions, whose stream has ended.
    if (!execution) this.stream.end();
    else this.send(execution);
  }

  failed(err: unknown): void {
    if (this.opened) return; // keep-alives go on; the next notification or reconnect reads again
    this.opened = true;
    this.rejectFirst(err);
  }

  stopped(): void {
    if (!this.opened) {
      this.opened = true;
      this.rejectFirst(new ServiceUnavailableError());
    }
    this.stream?.end();
  }

  private send(execution: ExecutionRecord): void {
    const stream = this.stream as EventStream;
    if (stream.isClosed) return;
    if (stream.isBehind) {
      // The client reads slower than states come: keep only the latest for when it catches up.
      if (this.held === undefined) stream.onDrain(() => this.flushHeld());
      this.held = execution;
      return;
    }
    const state = serializedState(execution);
    if (state.id !== this.lastId) {
      this.lastId = state.id;
      stream.sendFrame(state.frame);
    }
    if (isTerminal(execution.status)) stream.end();
  }

  private flushHeld(): void {
    const held = this.held;
    this.held = undefined;
    if (held) this.send(held);
  }
}

/** GET /executions/{id}/stream and GET /executions/changes: Server-Sent Events over the LISTEN fan-out. */
export function addStreamRoutes(router: Router<ApiState>, deps: ApiDeps): void {
  const { waiters, changes } = deps;
  const keepAliveMs = deps.config.http.streamKeepAliveMs;

  addOperation(router, deps.routes, 'streamExecution', async ({ params, ctx }) => {
    const follower = new ExecutionFollower();
    // Registered before the first read, so a change committed in between is offered after it.
    const unsubscribe = waiters.subscribe(params.id, follower, { read: true });
    let current: ExecutionRecord | undefined;
    try {
      current = await follower.first;
    } catch (err) {
      unsubscribe();
      throw err;
    }
    if (!current) {
      unsubscribe();
      throw new ExecutionNotFoundError(params.id);
    }
    const stream = new EventStream(ctx, keepAliveMs, unsubscribe);
    follower.open(stream, current);
    return { status: 200, body: stream.body, contentType: 'text/event-stream' };
  });

  addOperation(router, deps.routes, 'streamExecutionChanges', async ({ query, ctx }) => {
    let missed = false;
    let unsubscribe: () => void = () => undefined;
    const stream = new EventStream(ctx, keepAliveMs, () => unsubscribe());
    unsubscribe = changes.subscribe({
      task: query.task,
      changed(e) {
        if (missed) return;
        if (!stream.isBehind) {
          stream.send('changed', JSON.stringify({ execution_id: e.id, task: e.task, status: e.status }));
          return;
        }
        // A reader that falls behind gets one sync once it catches up, instead of a backlog of changes.
        missed = true;
        stream.onDrain(() => {
          missed = false;
          stream.send('sync', '{}');
        });
      },
      sync: () => stream.send('sync', '{}'),
      stopped: () => stream.end(),
    });
    stream.send('sync', '{}');
    return { status: 200, body: stream.body, contentType: 'text/event-stream' };
  });
}
