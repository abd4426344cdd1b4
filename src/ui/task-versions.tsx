/**
 * A task's code versions (PRODUCT.md §9): the live workers serving each and its executions in flight,
 * so an operator knows when an old worker may go; for a version nobody serves while executions are
 * pinned to it, a warning and a way to move them all to a served version.
 */
import { useState } from 'preact/hooks';
import type { BulkResult, Task, TaskVersionState } from '../client';
import { useApi } from './api-context';
import { useAction } from './execution-actions';
import { ApiErrorBox } from './components';
import { describeUnserved, hasVersions, inFlight, isUnserved, servedVersions, versionLabel } from '../domain/version-text';
import { BULK_MAX } from './bulk';

type Version = TaskVersionState['version'];

/** The last bulk upgrade and its outcome: kept above the warnings, which vanish once a version is drained. */
interface Moved {
  from: Version;
  to: Version;
  result: BulkResult;
}

/** Runs one bulk upgrade at a time for the task; `onDone` re-reads the tasks either way. */
function useBulkUpgrade(task: Task, onDone: () => void) {
  const { client } = useApi();
  const action = useAction(onDone);
  const [moved, setMoved] = useState<Moved | undefined>(undefined);
  const run = (from: Version, to: Version, count: number): Promise<boolean> =>
    action.run(async () => {
      // At most what the operator confirmed: executions pinned to it since are left alone.
      const result = await client.bulkUpgrade({ task: task.name, version: to, task_version: from, limit: Math.min(BULK_MAX, Math.max(1, count)) });
      setMoved({ from, to, result });
    });
  return { busy: action.busy, error: action.error, moved, run };
}

type BulkUpgrade = ReturnType<typeof useBulkUpgrade>;

/** "Upgrade all to version 3", asking first with the count: code that does not replay a history fails that execution. */
function UpgradeAllButton({ from, to, bulk }: { from: TaskVersionState; to: Version; bulk: BulkUpgrade }) {
  const [confirming, setConfirming] = useState(false);
  // All of them can move: running ones of a version nobody serves belong to workers that are gone.
  const count = inFlight(from);
  const act = async () => {
    if (await bulk.run(from.version, to, count)) setConfirming(false);
  };
  return (
    <div class="actions" data-testid="upgrade-all" data-to={to ?? ''}>
      {!confirming && (
        <button type="button" disabled={bulk.busy} onClick={() => setConfirming(true)} data-testid="upgrade-all-button">
          Upgrade all to {versionLabel(to)}
        </button>
      )}
      {confirming && (
        <>
          <span>
            Move {count === 1 ? 'its execution' : `its ${count} executions`} in flight to {versionLabel(to)}? Each whose history that code does not
            replay fails; a running one moves once its lease has expired.
          </span>
          <button type="button" class="primary" disabled={bulk.busy} onClick={act} data-testid="confirm-upgrade-all">
            Yes, upgrade {count}
          </button>
          <button type="button" disabled={bulk.busy} onClick={() => setConfirming(false)}>
            No
          </button>
        </>
      )}
    </div>
  );
}

function UnservedVersion({ version, served, bulk }: { version: TaskVersionState; served: TaskVersionState[]; bulk: BulkUpgrade }) {
  return (
    <div class="warning-box" role="status" data-testid="unserved-version" data-version={version.version ?? ''}>
      {describeUnserved(version)} Deploy a worker of it, or upgrade them to a served version whose code replays their histories.
      {served.map((to) => (
        <UpgradeAllButton key={to.version ?? ''} from={version} to={to.version} bulk={bulk} />
      ))}
    </div>
  );
}

function VersionRow({ v }: { v: TaskVersionState }) {
  const unserved = isUnserved(v);
  return (
    <tr class={unserved ? 'unserved' : ''} data-testid="task-version" data-version={v.version ?? ''} data-unserved={String(unserved)}>
      <td>
        <span class={v.version === null ? 'muted' : 'mono'}>{v.version ?? 'unversioned'}</span>
        {v.current && (
          <span class="chip current" title="The version of the worker that registered the task last: new executions start on it" data-testid="current-version">
            current
          </span>
        )}
      </td>
      <td class="num" data-testid="version-workers">
        {v.workers}
      </td>
      <td class="num">{v.pending}</td>
      <td class="num">{v.running}</td>
      <td class="num">{v.waiting}</td>
    </tr>
  );
}

/** The versions table, newest first as the API orders them; nothing for a task only ever defined without one. */
export function TaskVersions({ task, onChanged }: { task: Task; onChanged(): void }) {
  const bulk = useBulkUpgrade(task, onChanged);
  if (!hasVersions(task.versions) && !bulk.moved && !bulk.error) return null;
  const served = servedVersions(task.versions);
  const m = bulk.moved;
  return (
    <>
      <h3>Versions, newest first</h3>
      <div class="table-scroll">
        <table class="versions" data-testid="task-versions">
          <thead>
            <tr>
              <th>Version</th>
              <th class="num" title="Live workers serving it">Workers</th>
              <th class="num">Pending</th>
              <th class="num">Running</th>
              <th class="num">Waiting</th>
            </tr>
          </thead>
          <tbody>
            {task.versions.map((v) => (
              <VersionRow key={v.version ?? ''} v={v} />
            ))}
          </tbody>
        </table>
      </div>
      {task.versions.filter(isUnserved).map((v) => (
        <UnservedVersion key={v.version ?? ''} version={v} served={served.filter((s) => s.version !== v.version)} bulk={bulk} />
      ))}
      {m && (
        <p class="ok" data-testid="upgrade-all-result" data-matched={m.result.matched} data-changed={m.result.changed}>
          Upgraded {m.result.changed} of {m.result.matched} matching executions from {versionLabel(m.from)} to {versionLabel(m.to)}.
        </p>
      )}
      <ApiErrorBox error={bulk.error} testId="upgrade-all-error" />
    </>
  );
}
