import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { WorkerObserver } from './engine/worker';

const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** Prometheus metrics of a worker, registered on `registry`. */
export function observeWorker(registry: Registry): WorkerObserver {
  const slots = new Gauge({ name: 'stepwise_worker_slots', help: 'Worker handler slots by state (busy, free)', labelNames: ['state'], registers: [registry] });
  const scheduleToStart = new Histogram({
    name: 'stepwise_schedule_to_start_seconds',
    help: 'Time from scheduling an execution (or from its later start_at) to its first claim by a worker',
    labelNames: ['task'],
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const executionDuration = new Histogram({
    name: 'stepwise_execution_run_seconds',
    help: 'Duration of one run of a handler, by task and outcome (completed, failed, retrying, suspended, lost)',
    labelNames: ['task', 'outcome'],
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const stepDuration = new Histogram({
    name: 'stepwise_step_duration_seconds',
    help: 'Duration of durable operations, by task and kind (step; sleep and event: time paused)',
    labelNames: ['task', 'kind'],
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const takeovers = new Counter({ name: 'stepwise_lease_takeovers_total', help: 'Executions claimed after another worker lost its lease', registers: [registry] });
  const retries = new Counter({ name: 'stepwise_retries_total', help: 'Failed attempts scheduled for a retry, by task', labelNames: ['task'], registers: [registry] });
  const outcomes = new Counter({ name: 'stepwise_execution_runs_total', help: 'Handler runs by task and outcome', labelNames: ['task', 'outcome'], registers: [registry] });
  const dbErrors = new Counter({ name: 'stepwise_database_errors_total', help: 'Database errors seen by the worker loop', labelNames: ['component'], registers: [registry] });
  return {
    claimed(executions) {
      for (const c of executions) {
        if (c.previousStatus === 'running') takeovers.inc();
        if (c.previousStatus === 'pending' && c.execution.attempt === 1) {
          scheduleToStart.observe({ task: c.execution.task }, Math.max(0, c.claimedAt.getTime() - c.readyAt.getTime()) / 1000);
        }
      }
    },
    finished(task, outcome, durationMs) {
      executionDuration.observe({ task, outcome }, durationMs / 1000);
      outcomes.inc({ task, outcome });
      if (outcome === 'retrying') retries.inc({ task });
    },
    step(task, kind, durationMs) {
      stepDuration.observe({ task, kind }, durationMs / 1000);
    },
    slots(busy, free) {
      slots.set({ state: 'busy' }, busy);
      slots.set({ state: 'free' }, free);
    },
    databaseError() {
      dbErrors.inc({ component: 'worker' });
    },
  };
}

/** Counts the executions the retention sweeper deleted; returns its `onDeleted` callback. */
export function observeRetention(registry: Registry): (count: number) => void {
  const deleted = new Counter({ name: 'stepwise_executions_deleted_total', help: 'Finished executions deleted past the retention period', registers: [registry] });
  return (count) => deleted.inc(count);
}

/** Serves GET /metrics for a worker-only process (an API process serves it on its own port). */
export async function serveMetrics(registry: Registry, host: string, port: number): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || req.url !== '/metrics') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"code":"route_not_found","message":"only GET /metrics is served here"}}');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      () => res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"code":"internal_error","message":"an internal error occurred"}}'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${host}:${address.port}/metrics`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
