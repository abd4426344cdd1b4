import type { Registry } from 'prom-client';
import type { Config } from '../config';
import type { Logger } from '../logger';
import type { Db } from '../store/db';
import type { GroupCommitter } from '../group-commit';
import type { NewExecution, ScheduleResult } from '../store/executions';
import type { ExecutionRecord } from '../store/rows';
import type { ExecutionChanges } from './execution-changes';
import type { ExecutionWaiters } from './execution-waiters';
import type { CompiledSpec } from './spec';
import type { TaskSchemaCache } from '../store/task-schemas';
import type { RouteOptions } from './typed';
import type { Tracing } from '../telemetry/tracing';
import type { WorkerProtocol } from './worker-protocol/protocol';

/** What the API's handlers are built from; everything is passed in, nothing is a module singleton. */
export interface ApiDeps {
  config: Readonly<Config>;
  db: Db;
  log: Logger;
  spec: CompiledSpec;
  registry: Registry;
  /** Long-polls and execution streams: the LISTEN fan-out by execution id. */
  waiters: ExecutionWaiters;
  /** The changes streams' fan-out (GET /executions/changes). */
  changes: ExecutionChanges;
  taskSchemas: TaskSchemaCache;
  routes: RouteOptions;
  /** Concurrent schedule requests share one INSERT and one commit (see createScheduler). */
  inserts: GroupCommitter<NewExecution, ScheduleResult>;
  /** Reads of single executions that arrive together share one query (see createExecutionReader). */
  reader: GroupCommitter<string, ExecutionRecord | undefined>;
  /** Spans of event deliveries; null when tracing is off. */
  tracing: Tracing | null;
  /** What the server keeps for the remote workers it serves (the worker protocol). */
  workerProtocol: WorkerProtocol;
}
