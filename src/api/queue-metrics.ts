import { Gauge, type Registry } from 'prom-client';
import type { Db } from '../store/db';
import { countActiveExecutions } from '../store/tasks';

/** A scrape reads the database at most this often; several scrapers share the answer. */
const CACHE_MS = 2000;

/**
 * `stepwise_executions{task,status}` (active executions) and `stepwise_queue_depth{state}` (pending,
 * waiting), read on scrape from active rows only. When the database is unreachable the last values
 * stay and the scrape still succeeds.
 */
export function measureQueue(registry: Registry, db: Db): void {
  if (registry.getSingleMetric('stepwise_executions')) return;
  let cached: { at: number; rows: Array<{ task: string; status: string; count: number }> } = { at: 0, rows: [] };
  let inFlight: Promise<void> | undefined;
  const refresh = async () => {
    if (Date.now() - cached.at < CACHE_MS) return;
    inFlight ??= countActiveExecutions(db)
      .then((rows) => {
        cached = { at: Date.now(), rows };
      })
      .catch(() => undefined)
      .finally(() => (inFlight = undefined));
    await inFlight;
  };
  new Gauge({
    name: 'stepwise_executions',
    help: 'Active executions by task and status (pending, running, waiting)',
    labelNames: ['task', 'status'],
    registers: [registry],
    async collect() {
      await refresh();
      this.reset();
      for (const r of cached.rows) this.set({ task: r.task, status: r.status }, r.count);
    },
  });
  new Gauge({
    name: 'stepwise_queue_depth',
    help: 'Executions waiting for a worker (pending) or for a time or an event (waiting)',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      await refresh();
      for (const state of ['pending', 'waiting']) {
        this.set({ state }, cached.rows.filter((r) => r.status === state).reduce((n, r) => n + r.count, 0));
      }
    },
  });
}
