/** The `webhooks` commands' human output, one function per kind of answer. `--json` bypasses all of it. */
import type { CreatedWebhook, Webhook, WebhookDelivery, WebhookDeliveryList } from '../client';
import { formatDuration, formatUtc, renderFields, renderTable } from './format';

const URL_MAX = 60;
const ERROR_MAX = 50;

/** The line under a new webhook's secret: no other answer, and no other command, shows it again. */
export const SECRET_SHOWN_ONCE = 'The secret is shown only once: store it now. It verifies the webhook-signature header of every delivery (Standard Webhooks).';

function countDeliveries(n: number): string {
  return n === 1 ? '1 delivery' : `${n} deliveries`;
}

/** A webhook's task filter: the names, or `all` for every task. */
function describeTasks(tasks: readonly string[] | null): string {
  return tasks === null ? 'all' : tasks.join(', ');
}

/** The subscribed webhooks, oldest first (as the API lists them). */
export function renderWebhooks(webhooks: readonly Webhook[]): string {
  if (webhooks.length === 0) return 'no webhooks (add one with: stepwise webhooks add URL)\n';
  return renderTable(
    [{ header: 'id' }, { header: 'url', max: URL_MAX }, { header: 'events' }, { header: 'tasks', max: 40 }, { header: 'created (UTC)' }],
    webhooks.map((w) => [w.webhook_id, w.url, w.events.join(','), describeTasks(w.tasks), formatUtc(w.created_at)]),
  );
}

/** A new subscription: its id and what it hears, then its secret and the warning that it is shown once. */
export function renderCreatedWebhook(w: CreatedWebhook): string {
  const fields = renderFields(
    [
      ['webhook', w.webhook_id],
      ['url', w.url],
      ['events', w.events.join(', ')],
      ['tasks', describeTasks(w.tasks)],
      ['secret', w.secret],
    ],
    2048,
  );
  return `${fields}\n${SECRET_SHOWN_ONCE}\n`;
}

export function renderRemovedWebhook(id: string): string {
  return `removed webhook ${id}; its pending deliveries will not be attempted\n`;
}

/** A delivery's latest latency, such as `84 ms`, or `–` before its first attempt. */
function describeLatency(d: WebhookDelivery): string {
  return d.last_latency_ms === null ? '–' : formatDuration(d.last_latency_ms);
}

/** A page of a webhook's deliveries, newest first, with where it sits in the whole list. */
export function renderWebhookDeliveries(list: WebhookDeliveryList): string {
  const { deliveries, total, offset } = list;
  if (deliveries.length === 0) {
    return total === 0 ? 'no deliveries yet\n' : `no deliveries from offset ${offset} (${countDeliveries(total)} in all)\n`;
  }
  const table = renderTable(
    [
      { header: 'delivery' },
      { header: 'event' },
      { header: 'execution' },
      { header: 'status' },
      { header: 'attempts', align: 'right' },
      { header: 'last code', align: 'right' },
      { header: 'latency', align: 'right' },
      { header: 'next attempt (UTC)' },
      { header: 'last error', max: ERROR_MAX },
    ],
    deliveries.map((d) => [
      d.delivery_id,
      d.event_type,
      d.execution_id ?? '–',
      d.status,
      String(d.attempts),
      d.last_status_code === null ? '–' : String(d.last_status_code),
      describeLatency(d),
      formatUtc(d.next_attempt_at),
      d.last_error ?? '–',
    ]),
  );
  const last = offset + deliveries.length;
  const more = last < total ? ` (next page: --offset ${last})` : '';
  return `${table}${offset + 1}-${last} of ${countDeliveries(total)}${more}\n`;
}

/** The answer to a test: the queued delivery, and how to follow it. */
export function renderTestQueued(webhookId: string, d: WebhookDelivery): string {
  return `queued test delivery ${d.delivery_id} to webhook ${webhookId} (${d.status}); follow it with: stepwise webhooks deliveries ${webhookId}\n`;
}
