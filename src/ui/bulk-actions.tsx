/**
 * "Cancel all matching" and "Retry all matching": each counts what it would take under the list's
 * filter, asks with that count, then acts on at most that many and says what changed. Mount it keyed
 * by the filter: a question asked about one filter must not be answered for another.
 */
import { useState } from 'preact/hooks';
import type { BulkResult } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox } from './components';
import { BULK_MAX, bulkBlocker, bulkBody, bulkNothing, bulkOutcome, bulkQuestion, bulkStatuses, type BulkAction } from './bulk';
import { toListQuery, type ListFilter } from './routes';

type Stage =
  | { kind: 'idle' }
  | { kind: 'counting'; action: BulkAction }
  | { kind: 'confirming'; action: BulkAction; count: number }
  | { kind: 'nothing'; action: BulkAction }
  | { kind: 'acting'; action: BulkAction; count: number }
  | { kind: 'done'; action: BulkAction; result: BulkResult };

const LABEL: Record<BulkAction, string> = { cancel: 'Cancel all matching…', retry: 'Retry all matching…' };
const CONSEQUENCE: Record<BulkAction, string> = {
  cancel: 'Running handlers are aborted, and unfinished child executions are cancelled with their parents.',
  retry: 'Each runs again from where it stopped: completed steps are not repeated.',
};

export function BulkActions({ filter, onDone }: { filter: ListFilter; onDone(): void }) {
  const { client } = useApi();
  const [stage, setStage] = useState<Stage>({ kind: 'idle' });
  const [error, setError] = useState<unknown>(undefined);
  useAuthPrompt(error);

  /** How many the action would take: one count per status it applies to, as the list would total them. */
  const count = async (action: BulkAction) => {
    setError(undefined);
    setStage({ kind: 'counting', action });
    try {
      const query = { ...toListQuery(filter), offset: 0, limit: 1 };
      const totals = await Promise.all(bulkStatuses(action, filter).map((status) => client.list({ ...query, status }).then((l) => l.total)));
      const n = totals.reduce((a, b) => a + b, 0);
      setStage(n === 0 ? { kind: 'nothing', action } : { kind: 'confirming', action, count: n });
    } catch (err) {
      setError(err);
      setStage({ kind: 'idle' });
    }
  };

  const act = async (action: BulkAction, n: number) => {
    setStage({ kind: 'acting', action, count: n });
    try {
      const body = bulkBody(filter, n);
      const result = action === 'cancel' ? await client.bulkCancel(body) : await client.bulkRetry(body);
      setStage({ kind: 'done', action, result });
    } catch (err) {
      setError(err);
      setStage({ kind: 'idle' });
    } finally {
      onDone();
    }
  };

  const asking = stage.kind === 'confirming' || stage.kind === 'acting';
  return (
    <div class="bulk" data-testid="bulk-actions">
      <div class="actions">
        {(['cancel', 'retry'] as const).map((action) => {
          const blocked = bulkBlocker(action, filter);
          return (
            <button
              key={action}
              type="button"
              class={action === 'cancel' ? 'danger' : ''}
              disabled={blocked !== null || stage.kind === 'counting' || asking}
              title={blocked ?? undefined}
              data-testid={`bulk-${action}`}
              onClick={() => count(action)}
            >
              {LABEL[action]}
            </button>
          );
        })}
        {stage.kind === 'nothing' && (
          <span class="muted" data-testid="bulk-nothing">
            {bulkNothing(stage.action, filter)}
          </span>
        )}
        {stage.kind === 'done' && (
          <span class="ok" data-testid="bulk-result" data-matched={stage.result.matched} data-changed={stage.result.changed}>
            {bulkOutcome(stage.action, stage.result)}
          </span>
        )}
      </div>
      {asking && (
        <div class="confirm-box" role="alertdialog" aria-labelledby="bulk-question" data-testid="bulk-confirm">
          <strong id="bulk-question">{bulkQuestion(stage.action, filter, stage.count)}</strong>
          <div class="muted small">{CONSEQUENCE[stage.action]}</div>
          <div class="actions">
            <button
              type="button"
              class={stage.action === 'cancel' ? 'danger solid' : 'primary'}
              disabled={stage.kind === 'acting'}
              data-testid="bulk-confirm-yes"
              onClick={() => act(stage.action, stage.count)}
            >
              {stage.action === 'cancel' ? 'Yes, cancel' : 'Yes, retry'} {Math.min(stage.count, BULK_MAX)}
            </button>
            <button type="button" disabled={stage.kind === 'acting'} data-testid="bulk-confirm-no" onClick={() => setStage({ kind: 'idle' })}>
              No
            </button>
          </div>
        </div>
      )}
      <ApiErrorBox error={error} testId="bulk-error" />
    </div>
  );
}
