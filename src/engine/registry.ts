import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseCronTrigger, type CronSchedule } from '../domain/cron';
import { parseDuration } from '../domain/duration';
import { isThrottled, parseFlow, type FlowPolicy } from '../domain/flow';
import { resolveRetryPolicy, type ResolvedRetryPolicy } from '../domain/retry';
import { parseTaskVersion } from '../domain/version';
import type { TaskRegistration } from '../store/tasks';
import { isTaskDefinition, type TaskDefinition } from './task';

/** A task as a worker runs it: its definition, with its retry policy and timeout resolved once. */
export interface RegisteredTask {
  def: TaskDefinition;
  retry: ResolvedRetryPolicy;
  /** The task's timeout in milliseconds, if it has one. */
  timeoutMs: number | undefined;
  /** Its concurrency limit, rate limit and debounce. */
  flow: FlowPolicy;
  /** The version of its code ('' when the definition has none). */
  version: string;
}

/** The tasks one worker serves, by name, with their retry policies resolved once. */
export class TaskRegistry {
  private readonly tasks = new Map<string, RegisteredTask & { cron: CronSchedule | null }>();

  constructor(definitions: readonly TaskDefinition[] = []) {
    for (const def of definitions) this.add(def);
  }

  add(def: TaskDefinition): void {
    if (this.tasks.has(def.name)) throw new Error(`task ${def.name} is defined twice`);
    const cron = def.cron === undefined ? null : parseCronTrigger(def.name, def.cron);
    const timeoutMs = def.timeout === undefined ? undefined : parseDuration(def.timeout, `task ${def.name}: timeout`);
    this.tasks.set(def.name, { def, retry: resolveRetryPolicy(def.retry), timeoutMs, cron, flow: parseFlow(def.name, def), version: parseTaskVersion(def.name, def.version) });
  }

  get(name: string): RegisteredTask | undefined {
    return this.tasks.get(name);
  }

  /** The flow control of each task whose claims must count: a concurrency limit or a rate limit. */
  throttled(): Map<string, FlowPolicy> {
    return new Map([...this.tasks.values()].flatMap(({ def, flow }) => (isThrottled(flow) ? [[def.name, flow] as const] : [])));
  }

  /** The tasks that run on a schedule, with their schedules. */
  cronSchedules(): Array<{ task: string; schedule: CronSchedule }> {
    return [...this.tasks.values()].flatMap(({ def, cron }) => (cron ? [{ task: def.name, schedule: cron }] : []));
  }

  names(): string[] {
    return [...this.tasks.keys()];
  }

  /** Each task with the version of it this worker serves: what its claims take (see ClaimTask). */
  served(): Array<{ name: string; version: string }> {
    return [...this.tasks.values()].map(({ def, version }) => ({ name: def.name, version }));
  }

  get size(): number {
    return this.tasks.size;
  }

  /** What the database records for the API: names and JSON Schemas (TypeBox's symbols drop out). */
  toRegistrations(): TaskRegistration[] {
    return [...this.tasks.values()].map(({ def, retry, cron, flow, version }) => ({
      name: def.name,
      dataSchema: def.data ? JSON.parse(JSON.stringify(def.data)) : null,
      eventSchemas: JSON.parse(JSON.stringify(def.events ?? {})),
      retry,
      cron: cron ? { pattern: cron.pattern, timezone: cron.timezone } : null,
      flow,
      version,
    }));
  }
}

/** Collects every defineTask export of a module (also inside exported arrays). */
export function collectTasks(moduleExports: unknown): TaskDefinition[] {
  const found: TaskDefinition[] = [];
  const visit = (value: unknown) => {
    if (isTaskDefinition(value)) found.push(value);
    else if (Array.isArray(value)) value.forEach(visit);
  };
  if (moduleExports && typeof moduleExports === 'object') {
    for (const value of Object.values(moduleExports as Record<string, unknown>)) {
      if (value && typeof value === 'object' && !isTaskDefinition(value) && !Array.isArray(value)) {
        // `export default { a, b }` or a CJS-interop namespace
        for (const inner of Object.values(value as Record<string, unknown>)) visit(inner);
      } else visit(value);
    }
  }
  return [...new Set(found)];
}

/** A tasks module that cannot be used: the operator's to fix, reported in one line. */
export class TasksFileError extends Error {
  override name = 'TasksFileError';
}

/**
 * Loads a tasks module (.ts through tsx, .js, .cjs, .mjs) and returns its tasks. CommonJS and
 * TypeScript modules are loaded with `require`, so their `import ... from 'stepwise-workflows'` shares this
 * process's module instances. Throws a clear error when the file is missing, fails to load, or
 * defines no task.
 */
export async function loadTasksModule(file: string): Promise<TaskDefinition[]> {
  const absolute = path.resolve(file);
  if (!/\.(ts|cts|mts|js|cjs|mjs)$/.test(absolute)) throw new TasksFileError(`tasks file ${file} must be a .ts, .js or .mjs module`);
  if (!existsSync(absolute)) throw new TasksFileError(`tasks file ${file} does not exist`);
  let mod: unknown;
  try {
    if (/\.(mjs|mts)$/.test(absolute)) {
      if (absolute.endsWith('.mts')) (await import('tsx/esm/api')).register();
      mod = await import(pathToFileURL(absolute).href);
    } else {
      if (/\.(ts|cts)$/.test(absolute)) (await import('tsx/cjs/api')).register();
      mod = require(absolute);
    }
  } catch (err) {
    throw new TasksFileError(`tasks file ${file} failed to load: ${(err as Error).message}`);
  }
  const tasks = collectTasks(mod);
  if (tasks.length === 0) throw new TasksFileError(`tasks file ${file} exports no task made by defineTask`);
  return tasks;
}
