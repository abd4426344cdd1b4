import { LazyAbortController } from './abort';
import { StepTimeoutError } from './errors';

/** What a step's function is given: its attempt (1 for the first) and a signal for it. */
export interface StepAttempt {
  readonly attempt: number;
  /**
   * Aborted when this attempt times out (StepTimeoutError) or the execution stops (cancelled, timed
   * out, lease lost, worker shutting down). Made on first use.
   */
  readonly signal: AbortSignal;
}

/** A step's function. */
export type StepFn<T> = (step: StepAttempt) => Promise<T> | T;

/**
 * Runs one attempt of a step's function, bounded by `timeoutMs`. At the timeout the attempt fails
 * with StepTimeoutError and its signal aborts; the function itself cannot be stopped, so it may run
 * on, and whatever it returns then is dropped (a later attempt may overlap it).
 */
export async function runStepAttempt<T>(key: string, fn: StepFn<T>, attempt: number, timeoutMs: number | undefined, execution: LazyAbortController): Promise<T> {
  const abort = new LazyAbortController();
  let linked = false;
  const info: StepAttempt = {
    attempt,
    get signal() {
      if (!linked) {
        linked = true;
        if (execution.aborted) abort.abort(execution.reason);
        else execution.signal.addEventListener('abort', () => abort.abort(execution.reason), { once: true });
      }
      return abort.signal;
    },
  };
  if (timeoutMs === undefined) return await fn(info);
  let timer: NodeJS.Timeout | undefined;
  const running = Promise.resolve().then(() => fn(info));
  // The function may settle after the timeout, when nobody listens any more.
  running.catch(() => undefined);
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new StepTimeoutError(key, timeoutMs);
      abort.abort(err);
      reject(err);
    }, timeoutMs);
  });
  try {
    return await Promise.race([running, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
