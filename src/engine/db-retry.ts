import { isDatabaseUnavailable, isTransientConflict } from '../store/db-errors';
import { StoreUnavailableError } from './errors';

/**
 * Retries `fn` while the database is unreachable (a restart, a failover), or while its statement loses
 * deadlocks to concurrent ones, with jittered exponential backoff, until `deadline` (epoch ms). Any
 * other error, or an abort, is thrown at once. An outage (or a conflict) that outlasts the deadline is
 * thrown as StoreUnavailableError, so callers can tell it from a handler's own failure: like an
 * outage, it abandons the attempt rather than using up a retry.
 */
export async function retryWhileUnavailable<T>(fn: () => Promise<T>, deadline: number, signal?: { readonly aborted: boolean }): Promise<T> {
  let delay = 100;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      // A deadlock or serialization failure rolled the statement back whole: running it again is safe too.
      if (!(isDatabaseUnavailable(err) || isTransientConflict(err)) || signal?.aborted) throw err;
      if (Date.now() + delay > deadline) throw new StoreUnavailableError(err);
      await new Promise((r) => setTimeout(r, delay / 2 + Math.random() * (delay / 2)));
      delay = Math.min(delay * 2, 3000);
    }
  }
}
