import type Router from '@koa/router';
import { ACTIVE_STATUSES, isTerminal } from '../domain/status';
import { ExecutionNotFoundError } from '../errors';
import type { ExecutionRecord } from '../store/rows';
import type { ApiDeps } from './deps';
import { DETACHED, detachResponse, type DetachedResponse } from './detached-responses';
import type { PendingWait, WaitEnd } from './execution-waiters';
import { toExecution } from './representations';
import { serializedState } from './serialized-states';
import type { ApiState } from './state';
import { addOperation, type HandlerResult } from './typed';

type WaitResult = HandlerResult<'waitForExecution'>;

function answer(execution: ExecutionRecord, waitedSeconds: number): WaitResult {
  if (isTerminal(execution.status)) return { status: 200, body: toExecution(execution) };
  return stillGoing(execution.id, execution.status, waitedSeconds);
}

function stillGoing(id: string, status: ExecutionRecord['status'], waitedSeconds: number): WaitResult {
  return {
    status: 202,
    body: {
      execution_id: id,
      status: status as 'pending' | 'running' | 'waiting',
      message: `execution is still ${status} after ${waitedSeconds} s; call again to keep waiting`,
    },
  };
}

/**
 * A long-poll answered outside Koa (see DetachedResponse): Node's response, its waiter, and the id
 * and status of the first read, not the execution (its data may be large). One object, told by its
 * waiter when the wait ends, as 10,000 of them may wait at once. It leaves Koa before the first read:
 * the Koa context then dies while the request is young, instead of outliving a few collections in
 * the read's queue and leaving holes among the long-lived objects of the parked connections.
 */
class LongPollAnswer implements WaitEnd {
  /** The status of the first read: what a 202 says when the client has hung up. */
  private status: ExecutionRecord['status'] = 'pending';

  constructor(
    private readonly response: DetachedResponse,
    private readonly pending: PendingWait,
    private readonly id: string,
    private readonly timeoutSeconds: number,
    private readonly deps: ApiDeps,
  ) {}

  /** Reads the execution: answers at once when it has ended (or is not found), else waits for its end. */
  start(): void {
    // A client that hangs up stops its wait at once instead of holding a waiter until the timeout.
    this.response.res.on('close', this.pending.cancel);
    this.deps.reader
      .submit(this.id)
      .then((current) => {
        if (!current) throw new ExecutionNotFoundError(this.id);
        if (isTerminal(current.status)) {
          this.stopWaiting();
          this.send(answer(current, 0));
          return;
        }
        // The shared constant rather than the row's own copy of the string.
        this.status = ACTIVE_STATUSES.find((status) => status === current.status) ?? current.status;
        // Told at once if the wait ended during the read (a completion, a hang-up, the server closing).
        this.pending.whenDone(this);
      })
      .catch((err: unknown) => {
        this.stopWaiting();
        this.response.fail(err, this.deps.log);
      });
  }

  /** Called from the waiters' fan-out and timers: answers, and never throws into them. */
  waitEnded(finished: ExecutionRecord | undefined): void {
    try {
      this.response.res.off('close', this.pending.cancel);
      // The ended state, serialized once for every long-poll of this execution (see serializedState).
      if (finished) return this.response.jsonText(200, serializedState(finished).bytes);
      // The client hung up: nobody reads this answer, so spare the database the re-read.
      if (this.response.hungUp) return this.send(stillGoing(this.id, this.status, this.timeoutSeconds));
      // Timed out (or the server is closing): one read for the real current status (it may have ended meanwhile).
      this.deps.reader
        .submit(this.id)
        .then((latest) => {
          if (!latest) throw new ExecutionNotFoundError(this.id);
          this.send(answer(latest, this.timeoutSeconds));
        })
        .catch((err: unknown) => this.response.fail(err, this.deps.log));
    } catch (err) {
      this.response.fail(err, this.deps.log);
    }
  }

  /** The answer is known without waiting: the waiter goes (it never tells this object, which did not ask). */
  private stopWaiting(): void {
    this.response.res.off('close', this.pending.cancel);
    this.pending.cancel();
  }

  private send(result: WaitResult): void {
    this.response.json(result.status, result.body);
  }
}

/** The long-poll: answers when the execution ends, or with its current status when the timeout passes. */
export function addWaitRoute(router: Router<ApiState>, deps: ApiDeps): void {
  const { reader, waiters } = deps;
  addOperation(router, deps.routes, 'waitForExecution', async ({ params, query, ctx }) => {
    const timeoutSeconds = query.timeout as number; // defaulted and clamped by validation
    if (timeoutSeconds === 0) {
      const current = await reader.submit(params.id);
      if (!current) throw new ExecutionNotFoundError(params.id);
      return answer(current, 0);
    }
    // Registered before the first read, so a completion between the two is not missed. Auth and
    // validation went through Koa; the read and the wait do not.
    const response = detachResponse(ctx);
    const pending = waiters.waitForTerminal(params.id, timeoutSeconds * 1000);
    new LongPollAnswer(response, pending, params.id, timeoutSeconds, deps).start();
    return DETACHED;
  });
}
