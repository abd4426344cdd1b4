/** Subscribing a webhook: the form, checked in the browser first, and the secret its answer shows this once. */
import { useRef, useState } from 'preact/hooks';
import type { CreatedWebhook, WebhookEventType } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox } from './components';
import { checkWebhookDraft, toggleEvent, WEBHOOK_EVENTS, type DraftProblem } from './webhooks';

function Problems({ problems, field }: { problems: DraftProblem[]; field: DraftProblem['field'] }) {
  const mine = problems.filter((p) => p.field === field);
  if (mine.length === 0) return null;
  return (
    <ul class="problems" data-testid={`webhook-${field}-problems`}>
      {mine.map((p) => (
        <li key={p.message}>{p.message}</li>
      ))}
    </ul>
  );
}

/** The form that subscribes a URL; `onCreated` gets the answer, secret included. */
/** `onCancel`, when given, offers to close the form. */
export function AddWebhookForm({ onCreated, onCancel }: { onCreated(webhook: CreatedWebhook): void; onCancel?: () => void }) {
  const { client } = useApi();
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<WebhookEventType[]>([...WEBHOOK_EVENTS]);
  const [tasks, setTasks] = useState('');
  const [problems, setProblems] = useState<DraftProblem[]>([]);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  useAuthPrompt(error);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    const check = checkWebhookDraft({ url, events, tasks });
    if (!check.ok) return setProblems(check.problems);
    setProblems([]);
    setBusy(true);
    try {
      onCreated(await client.createWebhook(check.url, check.events, { tasks: check.tasks }));
      setUrl('');
      setTasks('');
      setEvents([...WEBHOOK_EVENTS]);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="webhook-form" onSubmit={submit} data-testid="webhook-form" noValidate>
      <label class="field">
        <span>URL deliveries are POSTed to (http:// or https://)</span>
        <input
          type="text"
          class="wide"
          placeholder="https://hooks.example.com/stepwise"
          value={url}
          aria-invalid={problems.some((p) => p.field === 'url')}
          onInput={(e) => setUrl(e.currentTarget.value)}
          data-testid="webhook-url"
        />
        <Problems problems={problems} field="url" />
      </label>
      <fieldset class="field events-field">
        <legend>Events</legend>
        <div class="checks">
          {WEBHOOK_EVENTS.map((event) => (
            <label key={event} class="check">
              <input
                type="checkbox"
                checked={events.includes(event)}
                onChange={(e) => setEvents(toggleEvent(events, event, e.currentTarget.checked))}
                data-testid={`webhook-event-${event}`}
              />{' '}
              <code>{event}</code>
            </label>
          ))}
        </div>
        <Problems problems={problems} field="events" />
      </fieldset>
      <label class="field">
        <span>Only these tasks, comma-separated (optional; empty for every task)</span>
        <input type="text" class="wide" value={tasks} onInput={(e) => setTasks(e.currentTarget.value)} data-testid="webhook-tasks" />
        <Problems problems={problems} field="tasks" />
      </label>
      <div class="actions">
        <button type="submit" class="primary" disabled={busy} data-testid="webhook-submit">
          Add webhook
        </button>
        {onCancel && (
          <button type="button" onClick={onCancel}>
            Close
          </button>
        )}
      </div>
      <ApiErrorBox error={error} testId="webhook-form-error" />
    </form>
  );
}

/**
 * The new webhook's signing secret, which no other answer includes: kept in this component's state
 * only (never stored), gone once dismissed or when the page is left.
 */
export function SecretNotice({ webhook, onDismiss }: { webhook: CreatedWebhook; onDismiss(): void }) {
  const input = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState<'copied' | 'select' | undefined>(undefined);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(webhook.secret);
      setCopied('copied');
    } catch {
      // No clipboard access (an insecure origin, a denied permission): select it for Ctrl+C instead.
      input.current?.select();
      setCopied('select');
    }
  };
  return (
    <section class="card secret-notice" role="status" data-testid="webhook-secret-notice" data-webhook-id={webhook.webhook_id}>
      <h2>Webhook added: copy its signing secret now</h2>
      <p>
        <strong>This secret is shown only once.</strong> Stepwise never shows it again: store it where your receiver reads it, to verify the{' '}
        <code>webhook-signature</code> header of every delivery (Standard Webhooks). If it is lost, remove the webhook and add a new one.
      </p>
      <div class="secret-row">
        <input ref={input} type="text" class="mono secret" readOnly value={webhook.secret} aria-label="Signing secret" data-testid="webhook-secret" onFocus={(e) => e.currentTarget.select()} />
        <button type="button" class="primary" onClick={copy} data-testid="webhook-secret-copy">
          Copy
        </button>
        {copied === 'copied' && <span class="ok" data-testid="webhook-secret-copied">Copied to the clipboard.</span>}
        {copied === 'select' && <span class="muted">Selected: copy it with Ctrl+C (⌘C).</span>}
      </div>
      <p class="muted small">
        For <span class="mono">{webhook.url}</span> (webhook <span class="mono">{webhook.webhook_id}</span>).
      </p>
      <div class="actions">
        <button type="button" onClick={onDismiss} data-testid="webhook-secret-dismiss">
          I have stored it
        </button>
      </div>
    </section>
  );
}
