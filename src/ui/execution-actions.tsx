/** What an operator does to one execution: cancel it while it runs, retry it once it failed or was cancelled. */
import { useState } from 'preact/hooks';
import type { Execution } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox } from './components';
import { isCancellable, isRetryable } from './statuses';

/** Runs `action` once at a time, keeping its error to show; `onDone` refreshes the page either way. */
function useAction(onDone: () => void) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  useAuthPrompt(error);
  const run = async (action: () => Promise<unknown>): Promise<boolean> => {
    setBusy(true);
    setError(undefined);
    try {
      await action();
      return true;
    } catch (err) {
      setError(err);
      return false;
    } finally {
      setBusy(false);
      // Refused or not, the page may be stale (another operator acted): read it again.
      onDone();
    }
  };
  return { busy, error, run, clearError: () => setError(undefined) };
}

export function CancelButton({ execution, onDone }: { execution: Execution; onDone(): void }) {
  const { client } = useApi();
  const [confirming, setConfirming] = useState(false);
  const { busy, error, run } = useAction(onDone);
  if (!isCancellable(execution.status)) return null;
  const cancel = async () => {
    if (await run(() => client.cancel(execution.execution_id))) setConfirming(false);
  };
  return (
    <div class="actions">
      {!confirming && (
        <button type="button" class="danger" data-testid="cancel" onClick={() => setConfirming(true)}>
          Cancel execution
        </button>
      )}
      {confirming && (
        <>
          <span>Cancel this execution? A running handler is aborted.</span>
          <button type="button" class="danger" data-testid="confirm-cancel" disabled={busy} onClick={cancel}>
            Yes, cancel
          </button>
          <button type="button" onClick={() => setConfirming(false)}>
            Keep it
          </button>
        </>
      )}
      <ApiErrorBox error={error} testId="cancel-error" />
    </div>
  );
}

/**
 * Puts a failed or cancelled execution back to pending; it resumes from where it stopped (completed
 * steps are not run again). A refusal (409: it moved on meanwhile) stays shown after the page refreshes.
 */
export function RetryButton({ execution, onDone }: { execution: Execution; onDone(): void }) {
  const { client } = useApi();
  const { busy, error, run } = useAction(onDone);
  const retryable = isRetryable(execution.status);
  if (!retryable && !error) return null;
  return (
    <div class="actions">
      {retryable && (
        <>
          <button type="button" class="primary" data-testid="retry" disabled={busy} onClick={() => run(() => client.retry(execution.execution_id))}>
            Retry execution
          </button>
          <span class="muted small">Runs it again from where it stopped: completed steps are not repeated.</span>
        </>
      )}
      <ApiErrorBox error={error} testId="retry-error" />
    </div>
  );
}
