/** A task's code versions (PRODUCT.md §9) in plain words, for the dashboard and the CLI. */

/** One version of a task as GET /tasks shows it: null names the task defined without a version. */
export interface VersionState {
  version: string | null;
  /** The version of the worker that registered the task last: new executions start on it. */
  current: boolean;
  workers: number;
  pending: number;
  running: number;
  waiting: number;
}

/** `version 3`, or `the unversioned code` for the task defined without a version. */
export function versionLabel(version: string | null): string {
  return version === null ? 'the unversioned code' : `version ${version}`;
}

/** Its executions in flight: the ones that pin the version, so its workers must not all go yet. */
export function inFlight(v: VersionState): number {
  return v.pending + v.running + v.waiting;
}

/** Executions pinned to a version no live worker serves: nobody runs them until one is deployed or they are upgraded. */
export function isUnserved(v: VersionState): boolean {
  return v.workers === 0 && inFlight(v) > 0;
}

/** The versions live workers serve: where executions of an unserved version can be upgraded to. */
export function servedVersions<V extends VersionState>(versions: readonly V[]): V[] {
  return versions.filter((v) => v.workers > 0);
}

/** `No worker serves version 2: 3 executions wait for one.` */
export function describeUnserved(v: VersionState): string {
  const n = inFlight(v);
  return `No worker serves ${versionLabel(v.version)}: ${n === 1 ? '1 execution waits' : `${n} executions wait`} for one.`;
}

/**
 * `3* (2w, 4 in flight) · 2 (1w) · 1 (0w, 3 in flight!)`: the versions newest first, `*` on the current
 * one, with their workers and their executions in flight (an old version without any may be
 * stopped); `!` marks the unserved.
 */
export function describeVersions(versions: readonly VersionState[]): string {
  return versions
    .map((v) => {
      const n = inFlight(v);
      const flight = n === 0 ? '' : `, ${n} in flight${v.workers === 0 ? '!' : ''}`;
      return `${v.version ?? 'unversioned'}${v.current ? '*' : ''} (${v.workers}w${flight})`;
    })
    .join(' · ');
}

/**
 * Whether a task's versions are worth showing: it has a versioned release, or more than one. A task
 * only ever defined without a version has nothing to say here.
 */
export function hasVersions(versions: readonly VersionState[]): boolean {
  return versions.length > 1 || versions.some((v) => v.version !== null);
}

/**
 * The version an execution is pinned to, in words: its version; `unversioned`; or `not started` for a
 * pending execution never claimed, which the first worker to claim it pins to its own version.
 */
export function describeExecutionVersion(e: { task_version: string | null; attempt: number }): string {
  if (e.task_version !== null) return e.task_version;
  return e.attempt === 0 ? 'not started' : 'unversioned';
}

/** Whether the execution is pinned yet: a never-claimed one (no version, no attempt) is not, and any worker may start it. */
export function isPinned(e: { task_version: string | null; attempt: number }): boolean {
  return e.task_version !== null || e.attempt > 0;
}
