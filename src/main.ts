import path from 'node:path';
import closeWithGrace from 'close-with-grace';
import { metricsTokens } from './api/auth';
import { keepFinishedMs, listenUrlOf, type Config } from './config';
import { createLogger, type Logger } from './logger';
import { createDb, dbOptionsOf, type Db } from './store/db';
import { dbPoolStats } from './store/pool-guard';
import { acquireDevLock, DataFolderInUseError, type DevLock } from './store/dev-lock';
import { EmbeddedPostgresError, probePort, startEmbeddedPostgres, type EmbeddedPostgresHandle } from './store/embedded';
import { isMigrated, migrateLatest } from './store/migrate';
import { Worker } from './engine/worker';
import { CountFolder } from './engine/count-folder';
import { RetentionSweeper } from './engine/retention';
import { loadTasksModule } from './engine/registry';
import type { TaskDefinition } from './engine/task';
import { createMetricsRegistry, measureDbPool } from './metrics';
import { observeRetention, observeWorker, serveMetrics } from './worker-metrics';
import { WebhookDeliverer } from './webhooks/deliverer';
import { NotificationListener } from './store/listener';
import { observeWebhookDeliveries } from './webhooks/metrics';
import { StartupError } from './errors';
import { startTracing } from './telemetry/tracing';

/** The bundled example tasks, loaded by `stepwise dev` without --tasks. */
export const EXAMPLE_TASKS_FILE = path.join(__dirname, '..', 'examples', 'index.ts');

export { StartupError };

/** Describes a database URL without its password, for error messages. */
export function describeDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    return 'an unparseable DATABASE_URL';
  }
}

/**
 * A pool for `url` with the configured size and timeouts. `unbounded`: without the statement and
 * silence timeouts, for migrations, whose index builds on a large table may take minutes.
 */
async function connect(url: string, config: Config, log: Logger, unbounded = false): Promise<Db> {
  try {
    new URL(url);
  } catch {
    throw new StartupError('DATABASE_URL is not a valid URL (expected postgres://user:password@host:5432/database)');
  }
  const options = dbOptionsOf(config, url, log);
  const db = createDb(unbounded ? { ...options, timeouts: { ...options.timeouts, statementMs: 0, queryMs: 0 } } : options);
  try {
    await db.raw('SELECT 1');
  } catch (err) {
    await db.destroy();
    throw new StartupError(`cannot connect to PostgreSQL at ${describeDatabaseUrl(url)}: ${(err as Error).message}`);
  }
  log.debug({ database: describeDatabaseUrl(url) }, 'database connected');
  return db;
}

export interface RunOptions {
  config: Readonly<Config>;
  /** Run the API server. */
  api: boolean;
  /** Run a worker with these tasks (a module path), or none. */
  tasksFile?: string;
  concurrency?: number;
  /**
   * Start embedded PostgreSQL in this folder (`pgdata/` in it) when no databaseUrl is configured. The
   * process takes the folder's lock first (`dev.lock`): a second one on the same folder fails at once.
   */
  embeddedDir?: string;
  /** Apply migrations before starting (dev); otherwise require them applied. */
  migrate: boolean;
  log?: Logger;
}

export interface Running {
  url?: string;
  /** The database's URL; empty for a remote worker, which has none. */
  databaseUrl: string;
  /** Set when the database is the embedded one: where its data is. */
  embedded?: { dataDir: string };
  worker?: Worker;
  stop(): Promise<void>;
}

const portInUse = (port: number) => new StartupError(`port ${port} is already in use: choose another with --port or PORT`);

/** The API's port is free now (port 0 always is): else the StartupError the listen would end in. */
async function checkApiPort(config: Readonly<Config>): Promise<void> {
  if (config.port === 0) return;
  await probePort(config.port, config.host).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'EADDRINUSE') throw portInUse(config.port);
    // Anything else (a host this machine lacks …) is the listen's to report, with its own error.
  });
}

/**
 * Starts what the options ask for, in dependency order: database, migrations, API, worker. stop()
 * reverses it: stop accepting requests, drain and release the worker, close pools, stop PostgreSQL.
 */
export async function startStepwise(options: RunOptions): Promise<Running> {
  const { config } = options;
  const log = options.log ?? createLogger({ level: config.logLevel });
  // A taken API port is found before anything starts (an embedded database, migrations), and so is
  // a second `dev` on the data folder, by its lock.
  if (options.api) await checkApiPort(config);
  let lock: DevLock | undefined;
  if (!config.databaseUrl && options.embeddedDir) {
    try {
      lock = acquireDevLock(options.embeddedDir);
    } catch (err) {
      throw err instanceof DataFolderInUseError ? new StartupError(err.message) : err;
    }
  }
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((err: Error) => log.error({ err: err.message }, 'shutdown step failed'));
  };
  if (lock) stops.push(async () => lock.release()); // last of all, after PostgreSQL has stopped
  let embedded: EmbeddedPostgresHandle | undefined;
  try {
    let tasks: TaskDefinition[] = [];
    if (options.tasksFile) tasks = await loadTasksModule(options.tasksFile);
    let databaseUrl = config.databaseUrl;
    if (!databaseUrl) {
      if (!options.embeddedDir) throw new StartupError('DATABASE_URL is not set');
      log.info({ dataDir: options.embeddedDir }, 'starting embedded postgresql');
      embedded = await startEmbeddedPostgres({
        dataDir: path.join(options.embeddedDir, 'pgdata'),
        port: config.db.embeddedPort ?? 54329,
        exactPort: config.db.embeddedPort !== undefined,
        // This process holds the folder's lock: a server still running on it was left by a `dev` that is gone.
        takeOver: true,
        // Ctrl-C reaches this process only, which stops PostgreSQL last (after the worker released its executions).
        ownProcessGroup: true,
        onLog: (line) => log.debug({ postgres: line }, 'embedded postgresql'),
        onNotice: (message) => log.warn(message),
      }).catch((err: Error) => {
        throw err instanceof EmbeddedPostgresError ? new StartupError(`embedded PostgreSQL: ${err.message}`) : err;
      });
      const started = embedded;
      stops.push(() => started.stop());
      databaseUrl = embedded.url;
    }
    const db = await connect(databaseUrl, config, log);
    stops.push(() => db.destroy());
    // Null unless the standard OTEL_* variables ask for traces. Shut down after the API and the worker
    // (stops run in reverse), so the spans of their last executions and deliveries are exported.
    const tracing = startTracing({ log });
    if (tracing) stops.push(() => tracing.shutdown());
    if (options.migrate) {
      const migrator = await connect(databaseUrl, config, log, true);
      const applied = await migrateLatest(migrator).finally(() => migrator.destroy());
      if (applied.length) log.info({ applied }, 'migrations applied');
    } else if (!(await isMigrated(db))) {
      throw new StartupError('the database has pending migrations: run `stepwise migrate` first');
    }
    // Every process folds the execution-count deltas (see CountFolder): any one of them is enough.
    const folder = new CountFolder({ db, log });
    folder.start();
    stops.push(() => folder.stop());
    // LISTEN needs a session of its own: never through a transaction pooler (db.listenUrl).
    const listenUrl = listenUrlOf(config, databaseUrl);
    // One LISTEN connection for the whole process (see NotificationListener); the parts add their
    // channels and start it, and it stops after them (stops run in reverse).
    const listener = new NotificationListener({ url: listenUrl, log, connectTimeoutMs: config.db.connectTimeoutMs, queryTimeoutMs: config.db.queryTimeoutMs });
    stops.push(() => listener.stop());
    const registry = createMetricsRegistry();
    measureDbPool(registry, () => dbPoolStats(db));
    let url: string | undefined;
    if (options.api) {
      // Loaded only when serving: worker-only processes never load Koa.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { startApiServer } = require('./api/server') as typeof import('./api/server');
      const api = await startApiServer({ config, databaseUrl: listenUrl, listener, db, log, registry, tracing }).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'EADDRINUSE') throw portInUse(config.port);
        throw err;
      });
      stops.push(() => api.close());
      url = api.url;
    }
    let worker: Worker | undefined;
    if (tasks.length > 0) {
      // Webhook deliveries go out from worker processes (and `stepwise dev`), never from API-only ones.
      // Started before the worker, so that the worker's start is the last wait before the signal
      // handlers are installed (a signal before them would kill a worker already claiming), and
      // stopped after it.
      const deliverer = new WebhookDeliverer({
        db,
        databaseUrl: listenUrl,
        listener,
        log,
        policy: { allowPrivate: config.webhooks.allowPrivateTargets },
        concurrency: config.webhooks.concurrency,
        timeoutMs: config.webhooks.timeoutMs,
        retryBaseMs: config.webhooks.retryBaseMs,
        retryForMs: config.webhooks.retryForMs,
        pollIntervalMs: config.webhooks.pollIntervalMs,
        observer: observeWebhookDeliveries(registry, db),
      });
      await deliverer.start();
      stops.push(() => deliverer.stop());
      worker = new Worker({
        db,
        databaseUrl: listenUrl,
        listener,
        tasks,
        log,
        concurrency: options.concurrency ?? config.worker.concurrency,
        prefetch: config.worker.prefetch,
        prefetchHoldMs: config.worker.prefetchHoldMs,
        leaseMs: config.worker.leaseMs,
        pollIntervalMs: config.worker.pollIntervalMs,
        shutdownGraceMs: config.worker.shutdownGraceMs,
        limits: config.limits,
        keepSuspended: config.worker.keepSuspended,
        observer: observeWorker(registry),
        tracing,
      });
      await worker.start();
      const w = worker;
      stops.push(() => w.stop());
      const retentionMs = keepFinishedMs(config);
      if (retentionMs !== undefined) {
        const sweeper = new RetentionSweeper({ db, log, keepFinishedMs: retentionMs, intervalMs: config.retention.sweepIntervalMs, onDeleted: observeRetention(registry) });
        sweeper.start();
        stops.push(() => sweeper.stop());
      }
      if (!options.api && config.worker.metricsPort !== undefined) {
        const metrics = await serveMetrics(registry, { host: config.host, port: config.worker.metricsPort, tokens: metricsTokens(config) });
        log.info({ url: metrics.url, metrics: config.metrics.token === undefined ? 'public' : 'token' }, 'worker metrics listening');
        stops.push(metrics.close);
      }
    }
    lock?.update({ url, databaseUrl });
    return { url, databaseUrl, embedded: embedded && { dataDir: embedded.dataDir }, worker, stop: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** What a remote worker process runs: its tasks, and the API server(s) it talks to. */
export interface RemoteWorkerOptions {
  config: Readonly<Config>;
  tasksFile: string;
  /** The API server's base URL; several, comma-separated, are tried in turn. */
  url: string;
  token?: string;
  concurrency?: number;
  log?: Logger;
}

/**
 * Starts a worker that runs its tasks over the worker protocol of the API server at `url`, with no
 * database of its own (`stepwise worker --url`): the API servers claim and write for it. stop()
 * drains and releases it as a worker with a database does.
 */
export async function startRemoteWorker(options: RemoteWorkerOptions): Promise<Running> {
  const { config } = options;
  const log = options.log ?? createLogger({ level: config.logLevel });
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((err: Error) => log.error({ err: err.message }, 'shutdown step failed'));
  };
  try {
    const tasks = await loadTasksModule(options.tasksFile);
    const tracing = startTracing({ log });
    if (tracing) stops.push(() => tracing.shutdown());
    const registry = createMetricsRegistry();
    const worker = new Worker({
      remote: { url: options.url, token: options.token },
      tasks,
      log,
      concurrency: options.concurrency ?? config.worker.concurrency,
      prefetch: config.worker.prefetch,
      prefetchHoldMs: config.worker.prefetchHoldMs,
      leaseMs: config.worker.leaseMs,
      pollIntervalMs: config.worker.pollIntervalMs,
      shutdownGraceMs: config.worker.shutdownGraceMs,
      limits: config.limits,
      keepSuspended: config.worker.keepSuspended,
      observer: observeWorker(registry),
      tracing,
    });
    await worker.start().catch((err: Error) => {
      throw new StartupError(`cannot register with the API server at ${options.url}: ${err.message}`);
    });
    stops.push(() => worker.stop());
    if (config.worker.metricsPort !== undefined) {
      const metrics = await serveMetrics(registry, { host: config.host, port: config.worker.metricsPort, tokens: metricsTokens(config) });
      log.info({ url: metrics.url, metrics: config.metrics.token === undefined ? 'public' : 'token' }, 'worker metrics listening');
      stops.push(metrics.close);
    }
    return { databaseUrl: '', worker, stop: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** Applies migrations and returns their names. */
export async function runMigrations(config: Readonly<Config>, log: Logger): Promise<string[]> {
  if (!config.databaseUrl) throw new StartupError('DATABASE_URL is not set');
  const db = await connect(config.databaseUrl, config, log, true);
  try {
    return await migrateLatest(db);
  } finally {
    await db.destroy();
  }
}

/**
 * Deletes the finished executions older than `olderThanMs` now, in batches, and returns how many
 * (`stepwise prune`: for a first clean-up, or for deployments that keep executions forever otherwise).
 */
export async function pruneNow(config: Readonly<Config>, olderThanMs: number, log: Logger): Promise<number> {
  if (!config.databaseUrl) throw new StartupError('DATABASE_URL is not set');
  const db = await connect(config.databaseUrl, config, log);
  try {
    if (!(await isMigrated(db))) throw new StartupError('the database has pending migrations: run `stepwise migrate` first');
    // An operator's explicit clean-up: as fast as it goes, not paced like the background sweeps.
    return await new RetentionSweeper({ db, log, keepFinishedMs: olderThanMs, busyShare: 1 }).sweep();
  } finally {
    await db.destroy();
  }
}

/**
 * Stops gracefully on the first SIGINT/SIGTERM; a second one exits at once. The hard deadline leaves
 * the worker its grace period plus time to release and close.
 */
export function stopOnSignals(running: Running, config: Readonly<Config>, log: Logger): void {
  closeWithGrace({ delay: config.worker.shutdownGraceMs + 15000, logger: { error: (m: unknown) => log.error(String(m)) } }, async ({ signal, err }) => {
    if (err) log.error({ err: (err as Error).message }, 'fatal error; shutting down');
    log.info({ signal }, 'shutting down');
    await running.stop();
    log.info('stopped');
  });
}
