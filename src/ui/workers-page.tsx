/** The registered workers: state, host, tasks, load and last heartbeat. */
import type { WorkerInfo } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox, Instant, StatusBadge } from './components';
import { usePolling } from './use-polling';

const REFRESH_MS = 5000;

export function WorkersPage() {
  const { client, autoRefresh } = useApi();
  const workers = usePolling<WorkerInfo[]>(() => client.listWorkers(), [client], { intervalMs: REFRESH_MS, enabled: autoRefresh });
  useAuthPrompt(workers.error);
  const now = Date.now();
  return (
    <div>
      <div class="toolbar">
        <h1>Workers</h1>
      </div>
      <ApiErrorBox error={workers.error} />
      {!workers.data && !workers.error && <p class="muted">Loading…</p>}
      {workers.data && (
        <div class="table-scroll">
          <table data-testid="workers-table">
            <thead>
              <tr>
                <th>State</th>
                <th>Host</th>
                <th class="num">PID</th>
                <th>Version</th>
                <th>Tasks</th>
                <th class="num">Running</th>
                <th>Started</th>
                <th>Last seen</th>
              </tr>
            </thead>
            <tbody>
              {workers.data.length === 0 && (
                <tr>
                  <td colSpan={8} class="muted">
                    No worker is registered: start one with <code>stepwise worker --tasks …</code>.
                  </td>
                </tr>
              )}
              {workers.data.map((w) => (
                <tr key={w.worker_id} data-worker-id={w.worker_id} data-state={w.state} title={w.worker_id}>
                  <td>
                    <StatusBadge status={w.state} />
                  </td>
                  <td class="mono">{w.hostname}</td>
                  <td class="num">{w.pid}</td>
                  <td class="mono">{w.version}</td>
                  <td class="wrap">{w.tasks.join(', ')}</td>
                  <td class="num" data-testid="worker-running">
                    {w.running} / {w.concurrency}
                  </td>
                  <td>
                    <Instant iso={w.started_at} now={now} relative />
                  </td>
                  <td>
                    <Instant iso={w.last_seen_at} now={now} relative />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
