import { Registry, collectDefaultMetrics } from 'prom-client';

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
