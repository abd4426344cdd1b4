import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Db } from '../store/db';
import { measureDeliveryBacklog } from '../store/webhook-deliveries';
import type { DeliveryObserver } from './deliverer';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * Prometheus metrics of a process's webhook deliverer, registered on `registry`: attempts by outcome,
 * their latency, and the outbox's backlog (read from the database at each scrape: one count over the
 * pending deliveries' partial index).
 */
export function observeWebhookDeliveries(registry: Registry, db: Db): DeliveryObserver {
  const attempts = new Counter({
    name: 'stepwise_webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome (delivered, retrying, failed: retries exhausted, unrecorded: lease lost or webhook deleted)',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'stepwise_webhook_attempt_seconds',
    help: 'Webhook delivery attempts, from the start to the answer (or the failure), by outcome',
    labelNames: ['outcome'],
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const dbErrors = new Counter({ name: 'stepwise_webhook_database_errors_total', help: 'Database errors seen by the webhook deliverer', registers: [registry] });
  // One query per scrape for both gauges: the registry collects its metrics side by side, so the
  // second collect finds the first one's measurement in flight and shares it.
  let measuring: Promise<{ pending: number; overdueSeconds: number }> | undefined;
  const measure = () =>
    (measuring ??= measureDeliveryBacklog(db).finally(() => {
      measuring = undefined;
    }));
  new Gauge({
    name: 'stepwise_webhook_backlog',
    help: 'Webhook deliveries pending (due, scheduled for a retry, or being attempted)',
    registers: [registry],
    async collect() {
      try {
        this.set((await measure()).pending);
      } catch {
        // The database is away: the scrape shows the last value.
      }
    },
  });
  new Gauge({
    name: 'stepwise_webhook_backlog_overdue_seconds',
    help: 'How long the most overdue pending webhook delivery has been due (0 when none is)',
    registers: [registry],
    async collect() {
      try {
        this.set((await measure()).overdueSeconds);
      } catch {
        // As above.
      }
    },
  });
  return {
    attempted(outcome, latencyMs) {
      attempts.inc({ outcome });
      latency.observe({ outcome }, latencyMs / 1000);
    },
    databaseError() {
      dbErrors.inc();
    },
  };
}
