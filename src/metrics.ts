import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * A Prometheus registry with the process's default metrics. One per process: the API server adds its
 * HTTP metrics to it and the engine its own, and `/metrics` serves it whole. A leaf module, so the API
 * and the engine can both take it without importing each other.
 */
export function createMetricsRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** Why a request was refused with 503: its database cannot be reached, or every pool connection is busy. */
export type RefusalReason = 'database_unavailable' | 'pool_saturated';

/**
 * Counts requests answered 503 because no database connection could be had, by reason:
 * `pool_saturated` (every connection of the process's pool in use while the database answers: raise
 * `db.poolMax`, add processes, or find what holds connections) or `database_unavailable`. Several
 * servers (tests) may share one registry.
 */
export function countRefusals(registry: Registry): (reason: RefusalReason) => void {
  const name = 'stepwise_http_requests_refused_total';
  const counter =
    (registry.getSingleMetric(name) as Counter<'reason'> | undefined) ??
    new Counter({ name, help: 'Requests answered 503 because no database connection could be had, by reason (pool_saturated, database_unavailable)', labelNames: ['reason'] as const, registers: [registry] });
  return (reason) => counter.inc({ reason });
}

/** What a database pool holds right now (see store/pool-guard.ts's dbPoolStats). */
export interface PoolStats {
  used: number;
  free: number;
  waiting: number;
  silentClosures: number;
}

/**
 * `stepwise_db_pool_connections{state}`: the process's pool connections in use and free, and the
 * statements waiting for one (`waiting`): a pool often full with statements waiting is saturated.
 * `stepwise_db_connections_silent_total`: connections closed because the database went silent.
 */
export function measureDbPool(registry: Registry, stats: () => PoolStats | undefined): void {
  if (registry.getSingleMetric('stepwise_db_pool_connections')) return;
  new Gauge({
    name: 'stepwise_db_pool_connections',
    help: 'Database pool connections in use (used) and idle (free), and statements waiting for one (waiting)',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const s = stats();
      if (!s) return;
      this.set({ state: 'used' }, s.used);
      this.set({ state: 'free' }, s.free);
      this.set({ state: 'waiting' }, s.waiting);
    },
  });
  new Counter({
    name: 'stepwise_db_connections_silent_total',
    help: 'Database connections closed because the database sent nothing for db.queryTimeoutMs while a statement waited',
    registers: [registry],
    collect() {
      const s = stats();
      if (!s) return;
      this.reset();
      this.inc(s.silentClosures);
    },
  });
}
