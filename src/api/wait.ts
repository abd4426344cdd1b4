import type Router from '@koa/router';
import { isTerminal } from '../domain/status';
import { ExecutionNotFoundError } from '../errors';
import type { ExecutionRecord } from '../store/rows';
import type { ApiDeps } from './deps';
import { toExecution } from './representations';
import type { ApiState } from './state';
import { addOperation, type HandlerResult } from './typed';

function answer(execution: ExecutionRecord, waitedSeconds: number): HandlerResult<'waitForExecution'> {
  if (isTerminal(execution.status)) return { status: 200, body: toExecution(execution) };
  return {
    status: 202,
    body: {
      execution_id: execution.id,
      status: execution.status as 'pending' | 'running' | 'waiting',
      message: `execution is still ${execution.status} after ${waitedSeconds} s; call again to keep waiting`,
    },
  };
}

/** The long-poll: answers when the execution ends, or with its current status when the timeout passes. */
export function addWaitRoute(router: Router<ApiState>, deps: ApiDeps): void {
  const { reader, waiters } = deps;
  addOperation(router, deps.routes, 'waitForExecution', async ({ params, query, ctx }) => {
    const timeoutSeconds = query.timeout as number; // defaulted and clamped by validation
    // Registered before the first read, so a completion between the two is not missed.
    const pending = waiters.waitForTerminal(params.id, timeoutSeconds * 1000);
    try {
      const current = await reader.submit(params.id);
      if (!current) throw new ExecutionNotFoundError(params.id);
      if (isTerminal(current.status) || timeoutSeconds === 0) return answer(current, 0);
      // A client that hangs up stops its wait at once instead of holding a waiter until the timeout.
      ctx.res.once('close', pending.cancel);
      const finished = await pending.done;
      ctx.res.off('close', pending.cancel);
      if (finished) return answer(finished, timeoutSeconds);
      // The client hung up: nobody reads this answer, so spare the database the re-read.
      if (ctx.req.socket.destroyed) return answer(current, timeoutSeconds);
      // Timed out: one read for the real current status (it may have ended in the meantime).
      const latest = await reader.submit(params.id);
      if (!latest) throw new ExecutionNotFoundError(params.id);
      return answer(latest, timeoutSeconds);
    } finally {
      pending.cancel();
    }
  });
}
