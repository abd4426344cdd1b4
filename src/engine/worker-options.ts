import type { Logger } from '../logger';
import type { ClaimedExecution } from '../store/transitions/claim';
import type { Db } from '../store/db';
import type { ExecutionObserver } from './execution-runner';
import type { TaskDefinition } from './task';
import type { Tracing } from '../telemetry/tracing';
import type { NotificationListener } from '../store/listener';
import type { WorkerBackend } from './worker-backend';

/** Hooks for metrics; the engine itself knows no metrics library. */
export interface WorkerObserver extends ExecutionObserver {
  claimed?(executions: ClaimedExecution[]): void;
  /** A claim statement ran with room for `room` executions and took `took` (empty claims are races lost, or no work). */
  claim?(room: number, took: number): void;
  /** A claim of `task` left due executions behind although the worker had room: `limit` held them. */
  throttled?(task: string, limit: 'concurrency' | 'rate'): void;
  slots?(busy: number, free: number): void;
  databaseError?(): void;
}

/** Where a remote worker's API server is, and the token it presents (see docs/worker-protocol.md). */
export interface RemoteOptions {
  /** The API server's base URL (its base path included), such as `http://127.0.0.1:8080`; several, comma-separated, are tried in turn. */
  url: string;
  token?: string;
}

/**
 * A worker talks either to the database (`db` and `databaseUrl`), or to an API server over the worker
 * protocol (`remote`), with no database access; or through a `backend` of the caller's.
 */
export interface WorkerOptions {
  db?: Db;
  /** For the worker's LISTEN connection: a direct URL, never a transaction pooler's (config db.listenUrl). */
  databaseUrl?: string;
  /** Run remotely: every operation goes to this API server over HTTP (the worker protocol). */
  remote?: RemoteOptions;
  /** The port the worker runs its operations through; by default made from `db` or `remote`. */
  backend?: WorkerBackend;
  /** The process's shared LISTEN connection, started and stopped by the caller; else the worker opens its own. */
  listener?: NotificationListener;
  tasks: readonly TaskDefinition[];
  log: Logger;
  concurrency?: number;
  /**
   * Executions claimed ahead of free slots, started as slots free up. A busy worker then never waits
   * for a claim's round trip between handlers, and each statement carries more rows; an execution
   * that waited longer than `prefetchHoldMs` for a slot is handed back for other workers. Default:
   * automatic, what the worker starts in 20 ms at its current pace, between 2 and 8 times
   * `concurrency`; 0 turns prefetching off.
   */
  prefetch?: number;
  prefetchHoldMs?: number;
  leaseMs?: number;
  pollIntervalMs?: number;
  shutdownGraceMs?: number;
  observer?: WorkerObserver;
  /** Largest JSON of a step result or output, in bytes (4 MiB); most durable operations per execution (10,000). */
  limits?: Partial<{ valueBytes: number; operations: number }>;
  /**
   * Suspended handlers kept in memory (256), so that a wake-up this worker claims resumes them where
   * they paused instead of replaying their history; 0 always replays.
   */
  keepSuspended?: number;
  /**
   * Time between the worker's heartbeats (5 s): each records in `stepwise.workers` that it is alive and
   * how many handlers it runs, in one UPDATE of its own row.
   */
  heartbeatIntervalMs?: number;
  /** Silence after which readers report the worker `lost` (three heartbeat intervals); more than one interval. */
  lostAfterMs?: number;
  /** Workers lost for longer than this (1 hour) have their rows deleted by any other worker. */
  forgetLostAfterMs?: number;
  /**
   * Spans of each claimed run and each step, exported over OTLP (see startTracing); null or absent:
   * no tracing, at the cost of a null check. The caller owns it and shuts it down after stop().
   */
  tracing?: Tracing | null;
  /** How long progress is announced after an API server said it holds streams (PROGRESS_WINDOW_MS, 15 s). */
  progressWindowMs?: number;
}

/** The heartbeat a worker keeps when its options name none; it is reported lost once it missed three beats. */
export const DEFAULT_PRESENCE = Object.freeze({ heartbeatIntervalMs: 5000, missedBeats: 3, forgetLostAfterMs: 60 * 60 * 1000 });

/** The limits a worker applies when its options name none. */
export const DEFAULT_LIMITS = Object.freeze({ valueBytes: 4 * 1024 * 1024, operations: 10_000 });
