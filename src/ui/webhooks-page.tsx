/**
 * The webhooks: the subscriptions with a test message and a removal each, a form to add one (its secret
 * shown once), and the recent deliveries of the webhook chosen (`#/webhooks/{id}`).
 */
import { useState } from 'preact/hooks';
import type { CreatedWebhook, Webhook } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox, Instant, Section } from './components';
import { routeHref } from './routes';
import { usePolling } from './use-polling';
import { WebhookDeliveries } from './webhook-deliveries';
import { AddWebhookForm, SecretNotice } from './webhook-form';
import { describeTasks } from './webhooks';

const REFRESH_MS = 10_000;

/** Runs one action of a row at a time, keeping its error to show. */
function useRowAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  useAuthPrompt(error);
  const run = async (action: () => Promise<void>): Promise<void> => {
    setBusy(true);
    setError(undefined);
    try {
      await action();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run };
}

function WebhookRow(props: { webhook: Webhook; selected: boolean; now: number; onTested(): void; onRemoved(): void }) {
  const { webhook: w, selected, now } = props;
  const { client, navigate } = useApi();
  const [confirming, setConfirming] = useState(false);
  const [tested, setTested] = useState(false);
  const { busy, error, run } = useRowAction();
  const sendTest = () =>
    run(async () => {
      await client.testWebhook(w.webhook_id);
      setTested(true);
      // Its deliveries show the test message arrive (or its retries).
      if (!selected) navigate(routeHref({ page: 'webhooks', id: w.webhook_id }));
      props.onTested();
    });
  const remove = () =>
    run(async () => {
      await client.deleteWebhook(w.webhook_id);
      setConfirming(false);
      props.onRemoved();
    });
  return (
    <tr data-webhook-id={w.webhook_id} class={selected ? 'selected' : ''} title={`webhook ${w.webhook_id}`}>
      <td class="wrap mono webhook-url">{w.url}</td>
      <td class="wrap">
        <span class="tags">
          {w.events.map((e) => (
            <span key={e} class="chip mono">
              {e.replace(/^execution\./, '')}
            </span>
          ))}
        </span>
      </td>
      <td class={w.tasks === null ? 'muted' : 'wrap'}>{describeTasks(w.tasks)}</td>
      <td>
        <Instant iso={w.created_at} now={now} relative />
      </td>
      <td class="row-actions">
        {!confirming && (
          <div class="actions">
            <a href={routeHref({ page: 'webhooks', id: w.webhook_id })} data-testid="webhook-deliveries-link">
              Deliveries
            </a>
            <button type="button" disabled={busy} onClick={sendTest} data-testid="webhook-test" title="Queue a signed webhook.test message to this URL">
              Send test
            </button>
            <button type="button" class="danger" onClick={() => setConfirming(true)} data-testid="webhook-remove">
              Remove
            </button>
            {tested && (
              <span class="ok small" data-testid="webhook-test-queued">
                Test queued
              </span>
            )}
          </div>
        )}
        {confirming && (
          <div class="actions confirm-inline" data-testid="webhook-remove-confirm">
            <span>Remove it? Pending deliveries are dropped.</span>
            <button type="button" class="danger solid" disabled={busy} onClick={remove} data-testid="webhook-remove-yes">
              Yes, remove
            </button>
            <button type="button" onClick={() => setConfirming(false)}>
              Keep it
            </button>
          </div>
        )}
        <ApiErrorBox error={error} testId="webhook-row-error" />
      </td>
    </tr>
  );
}

export function WebhooksPage({ selectedId }: { selectedId?: string }) {
  const { client, autoRefresh, navigate } = useApi();
  const webhooks = usePolling<Webhook[]>(() => client.listWebhooks(), [client], { intervalMs: REFRESH_MS, enabled: autoRefresh });
  useAuthPrompt(webhooks.error);
  const [adding, setAdding] = useState(false);
  const [created, setCreated] = useState<CreatedWebhook | undefined>(undefined);
  const [testsSent, setTestsSent] = useState(0);
  const now = Date.now();
  const list = webhooks.data;
  const selected = list?.find((w) => w.webhook_id === selectedId);
  const onCreated = (webhook: CreatedWebhook) => {
    setCreated(webhook);
    setAdding(false);
    webhooks.reload();
  };
  const onRemoved = (id: string) => {
    if (created?.webhook_id === id) setCreated(undefined);
    if (id === selectedId) navigate(routeHref({ page: 'webhooks' }));
    webhooks.reload();
  };
  const showForm = adding || list?.length === 0;
  return (
    <div>
      <div class="toolbar">
        <h1>Webhooks</h1>
        <span class="muted">Signed HTTP POSTs of execution events (completed, failed, cancelled, waiting), retried until answered with 2xx.</span>
        {!showForm && (
          <button type="button" class="primary push-right" onClick={() => setAdding(true)} data-testid="webhook-add">
            Add webhook
          </button>
        )}
      </div>
      {created && <SecretNotice webhook={created} onDismiss={() => setCreated(undefined)} />}
      {showForm && (
        <Section title="Add a webhook" testId="webhook-add-section">
          <AddWebhookForm onCreated={onCreated} onCancel={list?.length === 0 ? undefined : () => setAdding(false)} />
        </Section>
      )}
      <ApiErrorBox error={webhooks.error} />
      {!list && !webhooks.error && <p class="muted">Loading…</p>}
      {list && (
        <div class="table-scroll">
          <table class="webhooks" data-testid="webhooks-table">
            <thead>
              <tr>
                <th>URL</th>
                <th>Events</th>
                <th>Tasks</th>
                <th>Created</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {list.length === 0 && (
                <tr>
                  <td colSpan={5} class="muted">
                    No webhook is subscribed yet.
                  </td>
                </tr>
              )}
              {list.map((w) => (
                <WebhookRow
                  key={w.webhook_id}
                  webhook={w}
                  selected={w.webhook_id === selectedId}
                  now={now}
                  onTested={() => setTestsSent((n) => n + 1)}
                  onRemoved={() => onRemoved(w.webhook_id)}
                />
              ))}
            </tbody>
          </table>
        </div>
      )}
      {selected && <WebhookDeliveries key={selected.webhook_id} webhook={selected} refreshKey={testsSent} />}
      {list && selectedId && !selected && (
        <p class="muted" data-testid="webhook-gone">
          No webhook has the id {selectedId} (it was removed?): choose one above.
        </p>
      )}
    </div>
  );
}
