/**
 * What an operator does to one execution: cancel it while it runs, retry it once it failed or was
 * cancelled, move it to another version of its task's code while it is pending or waiting.
 */
import { useState } from 'preact/hooks';
import type { Execution } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox } from './components';
import { versionLabel } from '../domain/version-text';
import { isCancellable, isRetryable } from './statuses';

/** Runs `action` once at a time, keeping its error to show; `onDone` refreshes the page either way. */
export function useAction(onDone: () => void) {
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

/**
 * Pins a pending or waiting execution (or a running one whose worker is gone) to `version` of its
 * task, whose workers then replay its history
 * with their code. Asks first: code that calls other durable operations than the history holds fails
 * the execution with a NonDeterminismError, which only the operator can rule out.
 */
export function UpgradeButton({ execution, version, onDone }: { execution: Execution; version: string | null; onDone(): void }) {
  const { client } = useApi();
  const [confirming, setConfirming] = useState(false);
  const { busy, error, run } = useAction(onDone);
  const label = versionLabel(version);
  const upgrade = async () => {
    if (await run(() => client.upgrade(execution.execution_id, version))) setConfirming(false);
  };
  return (
    <div class="actions" data-testid="upgrade-action" data-version={version ?? ''}>
      {!confirming && (
        <button type="button" data-testid="upgrade" onClick={() => setConfirming(true)}>
          Upgrade to {label}
        </button>
      )}
      {confirming && (
        <>
          <span>Replay this execution's history with the code of {label}? If it calls other operations, the execution fails.</span>
          <button type="button" class="primary" data-testid="confirm-upgrade" disabled={busy} onClick={upgrade}>
            Yes, upgrade
          </button>
          <button type="button" onClick={() => setConfirming(false)}>
            Keep it
          </button>
        </>
      )}
      <ApiErrorBox error={error} testId="upgrade-error" />
    </div>
  );
}
