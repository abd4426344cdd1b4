import type Router from '@koa/router';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ApiDeps } from './deps';
import type { RequestObserver } from './request-observers';
import type { ApiState } from './state';
import { addOperation } from './typed';

const HISTOGRAM = 'stepwise_http_request_duration_seconds';
const LONG_POLLS = 'stepwise_http_long_polls_waiting';
const STREAMS = 'stepwise_http_streams_open';
const WORKER_CLAIMS = 'stepwise_worker_claims_waiting';

/** Sources of the long-poll gauge per registry: several servers (tests) may share one registry. */
const longPollSources = new WeakMap<Registry, Set<() => number>>();

/** Reports how many long-polls wait right now (summed over the servers sharing the registry); returns an unregister function. */
export function measureLongPolls(registry: Registry, count: () => number): () => void {
  let sources = longPollSources.get(registry);
  if (!sources) {
    const set = new Set<() => number>();
    sources = set;
    longPollSources.set(registry, set);
    new Gauge({
      name: LONG_POLLS,
      help: 'Long-poll requests (GET /executions/{id}/wait) waiting for an execution to end',
      registers: [registry],
      collect() {
        let total = 0;
        for (const source of set) total += source();
        this.set(total);
      },
    });
  }
  sources.add(count);
  return () => sources.delete(count);
}

/** Sources of the remote workers' claims gauge per registry, as for the long-polls. */
const claimSources = new WeakMap<Registry, Set<() => number>>();

/** Reports how many remote workers' claims (the worker protocol's long-polls) wait for work; returns an unregister function. */
export function measureWorkerClaims(registry: Registry, count: () => number): () => void {
  let sources = claimSources.get(registry);
  if (!sources) {
    const set = new Set<() => number>();
    sources = set;
    claimSources.set(registry, set);
    new Gauge({
      name: WORKER_CLAIMS,
      help: 'Claims of remote workers (POST /worker/claim) waiting for due executions',
      registers: [registry],
      collect() {
        let total = 0;
        for (const source of set) total += source();
        this.set(total);
      },
    });
  }
  sources.add(count);
  return () => sources.delete(count);
}

/** Sources of the streams gauge per registry, as for the long-polls. */
const streamSources = new WeakMap<Registry, Set<() => { execution: number; changes: number }>>();

/** Reports how many event streams are open, by kind (execution, changes); returns an unregister function. */
export function measureStreams(registry: Registry, count: () => { execution: number; changes: number }): () => void {
  let sources = streamSources.get(registry);
  if (!sources) {
    const set = new Set<() => { execution: number; changes: number }>();
    sources = set;
    streamSources.set(registry, set);
    new Gauge({
      name: STREAMS,
      help: 'Event streams open: GET /executions/{id}/stream (stream="execution") and GET /executions/changes (stream="changes")',
      labelNames: ['stream'] as const,
      registers: [registry],
      collect() {
        const total = { execution: 0, changes: 0 };
        for (const source of set) {
          const n = source();
          total.execution += n.execution;
          total.changes += n.changes;
        }
        this.set({ stream: 'execution' }, total.execution);
        this.set({ stream: 'changes' }, total.changes);
      },
    });
  }
  sources.add(count);
  return () => sources.delete(count);
}

const measuredSerializations = new WeakSet<Registry>();

/**
 * Counts the execution states serialized for streams and long-polls (see serializedState): a read
 * offered to a thousand followers counts once.
 */
export function measureSerializations(registry: Registry, count: () => number): void {
  if (measuredSerializations.has(registry)) return;
  measuredSerializations.add(registry);
  new Counter({
    name: 'stepwise_http_states_serialized_total',
    help: 'Execution states serialized for event streams and long-polls: once per read, however many follow it',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(count());
    },
  });
}

/**
 * Times every request into a histogram labelled by method, route template (never the raw path, so
 * ids do not explode the label set) and status. Several servers may share one registry.
 */
export function measureRequests(registry: Registry): RequestObserver {
  const histogram =
    (registry.getSingleMetric(HISTOGRAM) as Histogram<'method' | 'route' | 'status'> | undefined) ??
    new Histogram({
      name: HISTOGRAM,
      help: 'HTTP request duration by method, route template and status',
      labelNames: ['method', 'route', 'status'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
      registers: [registry],
    });
  return (request, durationMs) => histogram.observe({ method: request.method, route: request.route, status: String(request.status) }, durationMs / 1000);
}

/** GET /metrics: the whole registry (HTTP, process and engine metrics) in the Prometheus text format. */
export function addMetricsRoute(router: Router<ApiState>, deps: ApiDeps): void {
  addOperation(router, deps.routes, 'getMetrics', async () => ({
    status: 200,
    body: await deps.registry.metrics(),
    contentType: deps.registry.contentType,
  }));
}

/** What operators did through the API: retries, bulk actions, pauses (see operatorMetrics). */
export interface OperatorMetrics {
  /** An execution put back to pending by an operator, alone (`single`) or by a bulk retry (`bulk`). */
  retried(source: 'single' | 'bulk', count?: number): void;
  /** A bulk action ran: `matched` rows found by the filter, `changed` of them moved. */
  bulk(action: 'cancel' | 'retry' | 'upgrade', matched: number, changed: number): void;
  /** Executions moved to another version by an operator. */
  upgraded(count: number): void;
  /** A task was paused or resumed. */
  paused(paused: boolean): void;
}

/** A counter of the registry, made once: several servers (tests) may share one registry. */
function sharedCounter<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Counter<L> {
  return (registry.getSingleMetric(name) as Counter<L> | undefined) ?? new Counter({ name, help, labelNames, registers: [registry] });
}

export function operatorMetrics(registry: Registry): OperatorMetrics {
  const retries = sharedCounter(registry, 'stepwise_operator_retries_total', 'Failed or cancelled executions put back to pending by an operator, by source (single, bulk)', ['source']);
  const bulkActions = sharedCounter(registry, 'stepwise_bulk_actions_total', 'Bulk actions run, by action (cancel, retry, upgrade)', ['action']);
  const bulkRows = sharedCounter(registry, 'stepwise_bulk_executions_total', 'Executions a bulk action matched, by action and result (changed, unchanged: moved on meanwhile)', ['action', 'result']);
  const upgrades = sharedCounter(registry, 'stepwise_operator_upgrades_total', 'Pending or waiting executions moved to another task version by an operator', []);
  const pauses = sharedCounter(registry, 'stepwise_task_pause_requests_total', 'Pause and resume requests answered 200, by action (pause, resume)', ['action']);
  return {
    retried: (source, count = 1) => retries.inc({ source }, count),
    bulk(action, matched, changed) {
      bulkActions.inc({ action });
      bulkRows.inc({ action, result: 'changed' }, changed);
      bulkRows.inc({ action, result: 'unchanged' }, matched - changed);
      if (action === 'retry') retries.inc({ source: 'bulk' }, changed);
    },
    upgraded: (count) => upgrades.inc(count),
    paused: (paused) => pauses.inc({ action: paused ? 'pause' : 'resume' }),
  };
}
