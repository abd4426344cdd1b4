import type Router from '@koa/router';
import { isTerminal } from '../domain/status';
import { ExecutionNotFoundError } from '../errors';
import type { GroupCommitter } from '../group-commit';
import type { ExecutionRecord } from '../store/rows';
import type { ApiDeps } from './deps';
import type { PendingWait } from './execution-waiters';
import { toExecution } from './representations';
import type { ApiContext, ApiState } from './state';
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
 * The wait itself, once the execution is known to be still going. Callbacks on `pending.done` rather
 * than an async function, and only the id and status of the first read kept: a parked long-poll holds
 * no suspended frame and no copy of the execution (its data may be large), as 10,000 of them may wait
 * at once.
 */
function answerWhenDone(
  pending: PendingWait,
  id: string,
  status: ExecutionRecord['status'],
  timeoutSeconds: number,
  ctx: ApiContext,
  reader: GroupCommitter<string, ExecutionRecord | undefined>,
): Promise<WaitResult> {
  const { req, res } = ctx;
  // A client that hangs up stops its wait at once instead of holding a waiter until the timeout.
  res.on('close', pending.cancel);
  return pending.done.then(async (finished) => {
    res.off('close', pending.cancel);
    if (finished) return answer(finished, timeoutSeconds);
    // The client hung up: nobody reads this answer, so spare the database the re-read.
    if (req.socket.destroyed) return stillGoing(id, status, timeoutSeconds);
    // Timed out: one read for the real current status (it may have ended in the meantime).
    const latest = await reader.submit(id);
    if (!latest) throw new ExecutionNotFoundError(id);
    return answer(latest, timeoutSeconds);
  });
}

/** The long-poll: answers when the execution ends, or with its current status when the timeout passes. */
export function addWaitRoute(router: Router<ApiState>, deps: ApiDeps): void {
  const { reader, waiters } = deps;
  addOperation(router, deps.routes, 'waitForExecution', async ({ params, query, ctx }) => {
    const timeoutSeconds = query.timeout as number; // defaulted and clamped by validation
    // Registered before the first read, so a completion between the two is not missed.
    const pending = waiters.waitForTerminal(params.id, timeoutSeconds * 1000);
    let parked = false;
    try {
      const current = await reader.submit(params.id);
      if (!current) throw new ExecutionNotFoundError(params.id);
      if (isTerminal(current.status) || timeoutSeconds === 0) return answer(current, 0);
      parked = true;
      // Returned, not awaited: this frame ends here (see answerWhenDone).
      return answerWhenDone(pending, current.id, current.status, timeoutSeconds, ctx, reader);
    } finally {
      // Stops waiting once the answer is known; a parked wait stops itself (it settles only when finished).
      if (!parked) pending.cancel();
    }
  });
}
