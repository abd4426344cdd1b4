import { Gauge, type Registry } from 'prom-client';
import type { Db } from '../store/db';
import { countExecutionsByTaskAndStatus } from '../store/execution-counts';
import { countPendingNotDue } from '../store/tasks';
import { ACTIVE_STATUSES } from '../domain/status';
import { countVersions, type VersionCount } from '../store/versions';

/** A scrape reads the database at most this often; several scrapers share the answer. */
const CACHE_MS = 2000;

/**
 * `stepwise_executions{task,status}` (active executions) and `stepwise_queue_depth{state}`, read on
 * scrape from active rows only. The queue depth splits pending executions into those a worker could
 * start now (`pending`) and those not due yet (`scheduled`: a later start or a retry's backoff), so
 * executions scheduled for next week do not look like a backlog to an autoscaler. When the database
 * is unreachable the last values stay and the scrape still succeeds.
 * `stepwise_executions_unserved{task,version}` counts the unfinished executions pinned to a version
 * no live worker serves: nobody will run them until one is deployed or they are upgraded (alert on > 0).
 */
export function measureQueue(registry: Registry, db: Db): void {
  if (registry.getSingleMetric('stepwise_executions')) return;
  let cached: { at: number; rows: Array<{ task: string; status: string; count: number }>; notDue: number; versions: VersionCount[] } = { at: 0, rows: [], notDue: 0, versions: [] };
  let inFlight: Promise<void> | undefined;
  const refresh = async () => {
    if (Date.now() - cached.at < CACHE_MS) return;
    inFlight ??= Promise.all([countExecutionsByTaskAndStatus(db, ACTIVE_STATUSES), countPendingNotDue(db), countVersions(db)])
      .then(([rows, notDue, versions]) => {
        cached = { at: Date.now(), rows, notDue, versions };
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
    help: 'Executions waiting for a worker (pending), for their start or retry time (scheduled), or in a sleep or event wait (waiting)',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      await refresh();
      const total = (status: string) => cached.rows.filter((r) => r.status === status).reduce((n, r) => n + r.count, 0);
      // Two statements, so a row can turn due in between: never report a negative depth.
      this.set({ state: 'pending' }, Math.max(0, total('pending') - cached.notDue));
      this.set({ state: 'scheduled' }, Math.min(cached.notDue, total('pending')));
      this.set({ state: 'waiting' }, total('waiting'));
    },
  });
  new Gauge({
    name: 'stepwise_executions_unserved',
    help: 'Unfinished executions pinned to a task version that no live worker serves (version "" is the task without one)',
    labelNames: ['task', 'version'],
    registers: [registry],
    async collect() {
      await refresh();
      this.reset();
      for (const v of cached.versions) {
        if (v.workers === 0) this.set({ task: v.task, version: v.version }, v.pending + v.running + v.waiting);
      }
    },
  });
}
