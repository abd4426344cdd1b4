/** An execution and the version of its task's code (PRODUCT.md §9): which it runs on, who serves it, where a replay diverged. */
import type { Divergence, Execution, Task } from '../client';
import { describeExecutionVersion, isPinned, servedVersions, versionLabel } from '../domain/version-text';
import { UpgradeButton } from './execution-actions';

/** The version fact: muted when there is none to name (unversioned, or not started and so not pinned yet). */
export function ExecutionVersion({ execution }: { execution: Execution }) {
  const text = describeExecutionVersion(execution);
  const title = isPinned(execution) ? 'Only workers serving this version of the task claim it' : "Not pinned yet: it starts on the task's current version, and stays on it";
  return (
    <span class={execution.task_version === null ? 'muted' : 'mono'} data-testid="task-version" title={title}>
      {text}
    </span>
  );
}

function Operation({ op, testId }: { op: Divergence['called']; testId: string }) {
  return (
    <span data-testid={testId}>
      {op.kind} “<code>{op.name}</code>”
    </span>
  );
}

/** Where a replay met another durable operation than the history holds: the two, side by side. */
export function DivergenceBox({ divergence: d }: { divergence: Divergence }) {
  return (
    <div class="divergence" data-testid="divergence" data-operation={d.operation}>
      Replay diverged at operation #{d.operation}: the history has{' '}
      {d.recorded ? <Operation op={d.recorded} testId="divergence-recorded" /> : <span data-testid="divergence-recorded">no operation there</span>}, the new
      code called <Operation op={d.called} testId="divergence-called" />.
      <div class="muted small">
        Its task's code changed under it. Run it on code that replays this history: guard the change with <code>ctx.patched()</code>, or serve the
        version it started on, then retry it.
      </div>
    </div>
  );
}

/** What becomes of an execution that no live worker of its version will claim, by its status. */
const STUCK: Partial<Record<Execution['status'], string>> = {
  pending: 'it stays pending',
  waiting: 'it will not resume',
  running: 'its worker is gone, and it will not be taken over',
};

/**
 * An unfinished execution pinned to a version no live worker serves never moves on: say so, and offer
 * each served version to upgrade it to (a running one moves once its lease expired, else the API
 * says it is held). A task no worker serves at all is NoWorkerWarning's to report; an execution never
 * claimed is not pinned, and any worker may start it.
 */
export function UnservedVersionWarning({ execution: x, task, onDone }: { execution: Execution; task: Task | undefined; onDone(): void }) {
  const outcome = STUCK[x.status];
  if (!task || task.workers === 0 || outcome === undefined || !isPinned(x)) return null;
  if (task.versions.some((v) => v.version === x.task_version && v.workers > 0)) return null;
  const targets = servedVersions(task.versions).filter((v) => v.version !== x.task_version);
  return (
    <div class="warning-box" role="status" data-testid="unserved-version-warning" data-version={x.task_version ?? ''}>
      No worker serves {versionLabel(x.task_version)} of task “{task.name}”, which this execution is pinned to: {outcome} until one is deployed, or until
      it is upgraded to a version whose code replays its history.
      {targets.map((v) => (
        <UpgradeButton key={v.version ?? ''} execution={x} version={v.version} onDone={onDone} />
      ))}
    </div>
  );
}
