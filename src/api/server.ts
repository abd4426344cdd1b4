import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Config } from '../config';
import type { Logger } from '../logger';
import { createMetricsRegistry, measureDbPool } from '../metrics';
import { CHANNEL_CHANGED, CHANNEL_PROGRESS, CHANNEL_STREAMS, CHANNEL_TASKS } from '../store/channels';
import type { Db } from '../store/db';
import { dbPoolStats } from '../store/pool-guard';
import { NotificationListener } from '../store/listener';
import { createApiApp } from './app';
import { createAuthenticators, isAuthOn } from './auth';
import { ExecutionChanges } from './execution-changes';
import { ExecutionWaiters } from './execution-waiters';
import { measureLongPolls, measureSerializations, measureStreams, measureWorkerClaims } from './metrics';
import { statesSerialized } from './serialized-states';
import { measureQueue } from './queue-metrics';
import { getSpec } from './spec';
import { TaskSchemaCache } from '../store/task-schemas';
import { createInsertBatcher } from './insert-batcher';
import { createExecutionReader } from './execution-reader';
import type { Tracing } from '../telemetry/tracing';
import { StreamsBeacon } from './streams-beacon';
import { answerMalformedRequests } from './malformed-requests';
import { WorkerProtocol } from './worker-protocol/protocol';

export interface ApiServerDeps {
  config: Readonly<Config>;
  /**
   * For the server's own LISTEN connection (the pool cannot hold a LISTEN): a direct URL, never a
   * transaction pooler's, which would drop the LISTEN with its transaction (config db.listenUrl).
   */
  databaseUrl: string;
  /** The process's shared LISTEN connection (see NotificationListener), stopped by the caller; else the server opens its own. */
  listener?: NotificationListener;
  /** Shared with the rest of the process; the server never closes it. */
  db: Db;
  log: Logger;
  registry?: Registry;
  /** Spans of event deliveries (see startTracing); the caller owns it and shuts it down after close(). */
  tracing?: Tracing | null;
  /** How often the server tells workers that it holds streams (STREAMS_ANNOUNCE_MS, 5 s). */
  streamsAnnounceMs?: number;
}

export interface ApiServer {
  server: http.Server;
  /** `http://host:port` plus the base path. */
  url: string;
  port: number;
  /** Answers open long-polls with 202, ends open streams, finishes in-flight requests, then stops listening. Idempotent. */
  close(): Promise<void>;
}

/**
 * Node's HTTP timeouts, chosen so a 3600 s long-poll is never cut while slow clients still are:
 * `requestTimeout` and `headersTimeout` bound only the time to *receive* a request (headers, body),
 * not the time to answer it; `timeout` (socket inactivity) stays 0 because an idle long-poll is
 * legitimately silent; `keepAliveTimeout` closes idle connections between requests. Node checks the
 * first two on an interval (30 s by default), shortened here so short limits are enforced on time.
 */
function createHttpServer(config: Readonly<Config>, handler: http.RequestListener, log: Logger): http.Server {
  const { requestTimeoutMs, headersTimeoutMs, keepAliveTimeoutMs } = config.http;
  const server = http.createServer(
    {
      requestTimeout: requestTimeoutMs,
      headersTimeout: Math.min(headersTimeoutMs, requestTimeoutMs),
      keepAliveTimeout: keepAliveTimeoutMs,
      connectionsCheckingInterval: Math.max(250, Math.min(5000, Math.floor(Math.min(headersTimeoutMs, requestTimeoutMs) / 4))),
    },
    handler,
  );
  server.timeout = 0;
  server.on('clientError', answerMalformedRequests(log));
  return server;
}

/**
 * Starts LISTEN in the background: when the database is down at start-up the server must still come
 * up (and answer 503), so a failed first connect is retried with backoff until it succeeds; after
 * that, the listener reconnects by itself.
 */
function startListening(listener: NotificationListener, log: Logger): { stop(): void } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let attempt = 0;
  const tryStart = () => {
    listener.start().catch((err: Error) => {
      if (stopped) return;
      const delay = Math.min(5000, 100 * 2 ** attempt++) * (0.5 + Math.random() / 2);
      log.warn({ err: err.message, attempt }, 'listen connection failed; retrying');
      timer = setTimeout(tryStart, delay);
      timer.unref();
    });
  };
  tryStart();
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}

/**
 * Stops accepting connections and lets in-flight requests finish: idle keep-alive connections are
 * closed at once and again as they fall idle, and whatever is still open after `graceMs` is cut.
 * (Node's own tools; http-terminator does the same but, loaded once per jest test file, leaks
 * stdout listeners through its logger.)
 */
async function closeGracefully(server: http.Server, graceMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const sweep = setInterval(() => server.closeIdleConnections(), 50);
  const cut = setTimeout(() => server.closeAllConnections(), graceMs);
  server.closeIdleConnections();
  try {
    await closed;
  } finally {
    clearInterval(sweep);
    clearTimeout(cut);
  }
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** The channels an API server listens on. */
const API_CHANNELS = [CHANNEL_CHANGED, CHANNEL_PROGRESS, CHANNEL_TASKS, CHANNEL_STREAMS];

/** Starts the HTTP API: its own LISTEN connection (or the process's), the long-poll and stream fan-outs, the Koa app, the server. */
export async function startApiServer(deps: ApiServerDeps): Promise<ApiServer> {
  const { config, db, log } = deps;
  const registry = deps.registry ?? createMetricsRegistry();
  const ownsListener = deps.listener === undefined;
  const listener = deps.listener ?? new NotificationListener({ url: deps.databaseUrl, log, connectTimeoutMs: config.db.connectTimeoutMs, queryTimeoutMs: config.db.queryTimeoutMs });
  // LISTENed now if the connection is up (a shared one), else from its connect.
  await listener.listen(API_CHANNELS);
  const reader = createExecutionReader(db);
  const beacon = new StreamsBeacon({ db, log, listener, streams: () => waiters.streams, intervalMs: deps.streamsAnnounceMs });
  const waiters = new ExecutionWaiters({ db, listener, pollIntervalMs: config.http.waitPollIntervalMs, log, reader, onStreamOpened: () => beacon.opened() });
  waiters.start();
  beacon.start();
  const changes = new ExecutionChanges({ db, listener, log });
  changes.start();
  const workerProtocol = new WorkerProtocol({ db, log, listener });
  const unmeasureLongPolls = measureLongPolls(registry, () => waiters.size);
  const unmeasureStreams = measureStreams(registry, () => ({ execution: waiters.streams, changes: changes.size }));
  measureSerializations(registry, statesSerialized);
  const unmeasureClaims = measureWorkerClaims(registry, () => workerProtocol.claims.size);
  const unmeasure = () => {
    unmeasureLongPolls();
    unmeasureStreams();
    unmeasureClaims();
  };
  measureQueue(registry, db);
  measureDbPool(registry, () => dbPoolStats(db));
  const taskSchemas = new TaskSchemaCache(db);
  const unfollow = taskSchemas.follow(listener);
  const listening = startListening(listener, log);
  const spec = getSpec();
  const app = createApiApp({
    config,
    db,
    log,
    spec,
    registry,
    waiters,
    taskSchemas,
    inserts: createInsertBatcher(db),
    reader,
    changes,
    tracing: deps.tracing ?? null,
    workerProtocol,
    routes: {
      spec,
      authenticators: createAuthenticators(config),
      bodyLimitBytes: config.http.bodyLimitBytes,
      bodyDiscardBytes: config.http.bodyDiscardBytes,
      jsonMaxDepth: config.http.jsonMaxDepth,
    },
  });
  const server = createHttpServer(config, app.callback(), log);
  try {
    await listen(server, config.port, config.host);
  } catch (err) {
    unmeasure();
    unfollow();
    listening.stop();
    await workerProtocol.close();
    beacon.stop();
    waiters.stop();
    changes.stop();
    if (ownsListener) await listener.stop();
    throw err;
  }
  const port = (server.address() as AddressInfo).port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${host}:${port}${config.basePath}`;
  const authOn = isAuthOn(config);
  const { tokens, workerTokens } = config.auth;
  // Counts only: a token never reaches the log.
  log.info({ url, auth: authOn ? 'on' : 'off', clientTokens: tokens.length, workerTokens: workerTokens.length, metrics: config.metrics.token === undefined ? 'public' : 'token' }, 'api server listening');
  if (!authOn) log.warn('authentication is off: no API tokens configured (set STEPWISE_API_TOKENS)');
  else if (tokens.length === 0) log.warn('no client tokens configured: every operation outside the worker protocol answers 401 or 403 (set STEPWISE_API_TOKENS)');
  let closing: Promise<void> | undefined;
  return {
    server,
    url,
    port,
    close() {
      closing ??= (async () => {
        unmeasure();
        listening.stop();
        // Before closing: a long-poll answers 202 and a stream ends now, so neither holds the close up.
        beacon.stop();
        waiters.stop();
        changes.stop();
        // Waiting claims answer with nothing now; writes in flight finish before the pool may go.
        const protocolClosed = workerProtocol.close();
        await closeGracefully(server, 5000);
        await protocolClosed;
        unfollow();
        if (ownsListener) await listener.stop();
      })();
      return closing;
    },
  };
}
