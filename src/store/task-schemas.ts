import type { EventEmitter } from 'node:events';
import type { ValidateFunction } from 'ajv';
import { SchemaValidators } from '../domain/json-schema';
import { TaskNotRegisteredError } from '../errors';
import { CHANNEL_TASKS } from './channels';
import type { Db } from './db';
import { getTask } from './tasks';

/** A registered task as the API and child executions check it: validators for its data and for each event it declared. */
export interface TaskValidators {
  name: string;
  validateData: ValidateFunction | undefined;
  validateEvent: ReadonlyMap<string, ValidateFunction>;
  /** The task debounces its schedules (see insertDebounced). */
  debounced?: boolean;
}

interface CacheEntry {
  task: TaskValidators;
  loadedAt: number;
}

/** The LISTEN connection, as far as the cache follows it: 'notification', 'connected', 'disconnected'. */
export type RegistrationFeed = Pick<EventEmitter, 'on' | 'off'> & { readonly isConnected: boolean };

export interface TaskSchemaCacheOptions {
  /** How long a task row is trusted before it is read again, when no notification would say it changed. */
  ttlMs?: number;
  /** How long while the followed feed is connected: changes arrive as notifications, this is a safety net. */
  listeningTtlMs?: number;
  /** Distinct compiled schemas kept; the oldest is dropped past this. */
  maxValidators?: number;
  now?: () => number;
}

/**
 * Validators for the schemas workers registered in stepwise.tasks. A task row is read on a miss and
 * kept; unknown tasks are not cached (the next request reads again), so a task registered a moment
 * ago is usable at once. A worker that re-registers a task notifies CHANNEL_TASKS, and a cache that
 * follows the API's LISTEN connection drops the entry when it hears it: the new schema applies from
 * the next request, and an idle API's first request needs no extra read. Without the connection (or
 * while it is down: notifications then are lost) an entry is trusted for `ttlMs` only. Compiled
 * validators are cached by the schema's JSON, so re-reading an unchanged row compiles nothing.
 */
export class TaskSchemaCache {
  private readonly tasks = new Map<string, CacheEntry>();
  /** Reads in progress, so a burst of requests for one task on a cold cache costs one query. */
  private readonly loading = new Map<string, Promise<TaskValidators>>();
  private readonly validators: SchemaValidators;
  /** Bumped by every invalidation: a read that started before one must not cache what it read. */
  private generation = 0;
  private feed: RegistrationFeed | undefined;
  private readonly ttlMs: number;
  private readonly listeningTtlMs: number;
  private readonly now: () => number;

  constructor(
    private readonly db: Db,
    options: TaskSchemaCacheOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 3000;
    this.listeningTtlMs = options.listeningTtlMs ?? 300_000;
    this.validators = new SchemaValidators(options.maxValidators ?? 1000);
    this.now = options.now ?? Date.now;
  }

  /**
   * Follows a LISTEN connection on CHANNEL_TASKS: a notified task is dropped, and everything is
   * dropped when the connection comes or goes (what changed while it was down went unheard).
   * Returns the function that stops following.
   */
  follow(feed: RegistrationFeed): () => void {
    const onNotification = (channel: string, payload: string) => {
      if (channel === CHANNEL_TASKS) this.invalidate(payload);
    };
    const onConnection = () => this.invalidateAll();
    feed.on('notification', onNotification);
    feed.on('connected', onConnection);
    feed.on('disconnected', onConnection);
    this.feed = feed;
    this.invalidateAll();
    return () => {
      feed.off('notification', onNotification);
      feed.off('connected', onConnection);
      feed.off('disconnected', onConnection);
      if (this.feed === feed) this.feed = undefined;
      this.invalidateAll();
    };
  }

  /** Forgets one task: the next request reads its row again. */
  invalidate(name: string): void {
    this.generation += 1;
    this.tasks.delete(name);
    this.loading.delete(name);
  }

  invalidateAll(): void {
    this.generation += 1;
    this.tasks.clear();
    this.loading.clear();
  }

  /** The task's validators; throws TaskNotRegisteredError when no worker registered it. */
  async getTask(name: string): Promise<TaskValidators> {
    const cached = this.tasks.get(name);
    const ttl = this.feed?.isConnected ? this.listeningTtlMs : this.ttlMs;
    if (cached && this.now() - cached.loadedAt < ttl) return cached.task;
    let loading = this.loading.get(name);
    if (!loading) {
      const started = this.loadTask(name, this.generation).finally(() => {
        if (this.loading.get(name) === started) this.loading.delete(name);
      });
      this.loading.set(name, started);
      loading = started;
    }
    return loading;
  }

  private async loadTask(name: string, generation: number): Promise<TaskValidators> {
    const row = await getTask(this.db, name);
    if (!row) {
      this.tasks.delete(name);
      throw new TaskNotRegisteredError(name);
    }
    const task: TaskValidators = {
      name,
      debounced: row.flow.debounce !== null,
      validateData: this.compile(row.dataSchema),
      validateEvent: new Map(
        Object.entries(row.eventSchemas ?? {}).flatMap(([event, schema]) => {
          const v = this.compile(schema);
          return v ? [[event, v] as const] : [];
        }),
      ),
    };
    // Invalidated while the row was read: what was read may predate the change, so it is used once only.
    if (generation === this.generation) this.tasks.set(name, { task, loadedAt: this.now() });
    return task;
  }

  private compile(schema: unknown): ValidateFunction | undefined {
    if (schema === null || schema === undefined) return undefined;
    return this.validators.get(JSON.stringify(schema), () => schema);
  }
}

