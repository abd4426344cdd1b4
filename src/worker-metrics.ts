import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { createBearerCheck } from './api/auth';
import type { WorkerObserver } from './engine/worker';
import { AppError, UnauthorizedError } from './errors';

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
  const throttled = new Counter({
    name: 'stepwise_claims_throttled_total',
    help: 'Claims that left due executions behind although the worker had room, by task and the limit (concurrency, rate) that held them',
    labelNames: ['task', 'limit'],
    registers: [registry],
  });
  const claims = new Counter({
    name: 'stepwise_claims_total',
    help: 'Claim statements by result: full (took all the room asked), partial, or empty (no due work, or every due row locked by other claimers)',
    labelNames: ['result'],
    registers: [registry],
  });
  const claimedRows = new Counter({ name: 'stepwise_claimed_executions_total', help: 'Executions claimed (with claims_total: executions per claim statement)', registers: [registry] });
  const dbErrors = new Counter({ name: 'stepwise_database_errors_total', help: 'Database errors seen by the worker loop', labelNames: ['component'], registers: [registry] });
  const detached = new Gauge({
    name: 'stepwise_detached_handlers',
    help: 'Handlers stopped (cancelled, timed out, lease lost) that still run without a slot; nothing they do is recorded',
    registers: [registry],
  });
  return {
    claimed(executions) {
      for (const c of executions) {
        if (c.previousStatus === 'running') takeovers.inc();
        if (c.previousStatus === 'pending' && c.execution.attempt === 1) {
          scheduleToStart.observe({ task: c.execution.task }, Math.max(0, c.claimedAt.getTime() - c.readyAt.getTime()) / 1000);
        }
      }
    },
    claim(room, took) {
      claims.inc({ result: took === 0 ? 'empty' : took >= room ? 'full' : 'partial' });
      claimedRows.inc(took);
    },
    throttled(task, limit) {
      throttled.inc({ task, limit });
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
    detached(delta) {
      detached.inc(delta);
    },
  };
}

/** Counts the executions the retention sweeper deleted; returns its `onDeleted` callback. */
export function observeRetention(registry: Registry): (count: number) => void {
  const deleted = new Counter({ name: 'stepwise_executions_deleted_total', help: 'Finished executions deleted past the retention period', registers: [registry] });
  return (count) => deleted.inc(count);
}

/** How a worker-only process serves GET /metrics. */
export interface MetricsServerOptions {
  host: string;
  port: number;
  /** Bearer tokens a scrape must present (see metricsTokens in api/auth.ts); empty: public. */
  tokens: readonly string[];
}

/** The API's common headers (see api/response-headers.ts). */
const ANSWER_HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };

/** An error envelope by hand: this server is plain node:http, without the API's middleware. */
function sendError(res: http.ServerResponse, error: AppError): void {
  res.writeHead(error.status, { ...ANSWER_HEADERS, ...error.headers, 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { code: error.code, message: error.message } }));
}

/** Serves GET /metrics for a worker-only process (an API process serves it on its own port). */
export async function serveMetrics(registry: Registry, options: MetricsServerOptions): Promise<{ url: string; close: () => Promise<void> }> {
  const isAuthorized = createBearerCheck(options.tokens);
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || req.url !== '/metrics') {
      sendError(res, new AppError('route_not_found', 404, 'only GET /metrics is served here'));
      return;
    }
    if (!isAuthorized(req.headers.authorization)) {
      sendError(res, new UnauthorizedError());
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { ...ANSWER_HEADERS, 'content-type': registry.contentType }).end(text),
      () => sendError(res, new AppError('internal_error', 500, 'an internal error occurred')),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${address.port}/metrics`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
