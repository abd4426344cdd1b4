/** The recent deliveries of one webhook: status, event, execution, attempts and the latest answer, refreshed every few seconds. */
import type { Webhook, WebhookDeliveryList } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox, Instant, Section, StatusBadge } from './components';
import { routeHref } from './routes';
import { usePolling } from './use-polling';
import { describeLatency, describeStatusCode } from './webhooks';

/** A pending delivery's next attempt is due within seconds of a test: refresh about as often. */
const REFRESH_MS = 3000;
const PAGE_SIZE = 50;

/** `refreshKey` changes when the page knows of a new delivery (a test it queued): it loads again at once. */
export function WebhookDeliveries({ webhook, refreshKey }: { webhook: Webhook; refreshKey: number }) {
  const { client, autoRefresh } = useApi();
  const deliveries = usePolling<WebhookDeliveryList>(() => client.listWebhookDeliveries(webhook.webhook_id, { limit: PAGE_SIZE }), [client, webhook.webhook_id, refreshKey], {
    intervalMs: REFRESH_MS,
    enabled: autoRefresh,
  });
  useAuthPrompt(deliveries.error);
  const now = Date.now();
  const list = deliveries.data;
  const title = (
    <>
      Recent deliveries to <span class="mono">{webhook.url}</span>
    </>
  );
  const aside = list && list.total > list.deliveries.length ? <span class="muted small">the latest {list.deliveries.length} of {list.total}</span> : undefined;
  return (
    <Section title={title} aside={aside} testId="webhook-deliveries">
      <ApiErrorBox error={deliveries.error} />
      {!list && !deliveries.error && <p class="muted">Loading…</p>}
      {list && (
        <div class="table-scroll">
          <table data-testid="deliveries-table">
            <thead>
              <tr>
                <th>Status</th>
                <th>Event</th>
                <th>Execution</th>
                <th class="num">Attempts</th>
                <th class="num">Last status</th>
                <th class="num">Latency</th>
                <th>Next attempt</th>
                <th>Created</th>
                <th>Last error</th>
              </tr>
            </thead>
            <tbody>
              {list.deliveries.length === 0 && (
                <tr>
                  <td colSpan={9} class="muted">
                    No deliveries yet: they come with the next matching status change, or use “Send test”.
                  </td>
                </tr>
              )}
              {list.deliveries.map((d) => (
                <tr key={d.delivery_id} data-delivery-id={d.delivery_id} data-status={d.status} data-event={d.event_type} title={`delivery ${d.delivery_id} (the webhook-id header)`}>
                  <td>
                    <StatusBadge status={d.status} />
                  </td>
                  <td class="mono">{d.event_type}</td>
                  <td>
                    {d.execution_id ? (
                      <a class="mono" href={routeHref({ page: 'execution', id: d.execution_id })}>
                        {d.execution_id}
                      </a>
                    ) : (
                      <span class="muted">–</span>
                    )}
                  </td>
                  <td class="num" data-testid="delivery-attempts">
                    {d.attempts}
                  </td>
                  <td class="num" data-testid="delivery-status-code">
                    {describeStatusCode(d)}
                  </td>
                  <td class="num">{describeLatency(d)}</td>
                  <td>{d.status === 'pending' ? <Instant iso={d.next_attempt_at} now={now} relative /> : <span class="muted">–</span>}</td>
                  <td>
                    <Instant iso={d.created_at} now={now} relative />
                  </td>
                  <td class="wrap delivery-error">{d.last_error ?? <span class="muted">–</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Section>
  );
}
