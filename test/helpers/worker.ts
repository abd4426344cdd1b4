import { startApiServer, type ApiServer } from '../../src/api/server';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/logger';
import { Worker, type WorkerOptions } from '../../src/engine/worker';
import type { TaskDefinition } from '../../src/engine/task';
import type { Db } from '../../src/store/db';
import type { TestDatabase } from './db';

export const quietLog = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent', pretty: false });

/**
 * How test workers reach their executions: `direct` (the database, the default) or `remote` (an API
 * server over the worker protocol, with no database access), from STEPWISE_TEST_WORKER_MODE: the
 * environment's, or the jest project's globals (jest.config.js runs the semantic suites both ways).
 */
export const WORKER_MODE: 'direct' | 'remote' =
  ((globalThis as { STEPWISE_TEST_WORKER_MODE?: string }).STEPWISE_TEST_WORKER_MODE ?? process.env.STEPWISE_TEST_WORKER_MODE) === 'remote' ? 'remote' : 'direct';

/** The API servers tests started (startTestApi), by their database: remote workers talk to them. */
const testApis = new Map<Db, { url: string; token: string | undefined }>();

/** Called by startTestApi: remote workers of tests on this database use this server. */
export function useApiForRemoteWorkers(db: Db, api: { url: string; token: string | undefined } | undefined): void {
  if (api) testApis.set(db, api);
  else testApis.delete(db);
}

/** API servers this helper started for remote workers of a database no test server serves, with how many workers use each. */
const ownApis = new Map<Db, { server: Promise<ApiServer>; workers: number }>();

/** The API server a remote worker on `t` talks to, and what to do once that worker stopped. */
async function apiFor(t: TestDatabase): Promise<{ url: string; token: string | undefined; release: () => Promise<void> }> {
  const known = testApis.get(t.db);
  if (known) return { ...known, release: async () => undefined };
  let own = ownApis.get(t.db);
  if (!own) {
    const config = loadConfig({ env: {}, overrides: { port: 0, basePath: '', 'auth.tokens': [] } });
    own = { server: startApiServer({ config, databaseUrl: t.url, db: t.db, log: quietLog }), workers: 0 };
    ownApis.set(t.db, own);
  }
  own.workers += 1;
  const entry = own;
  const server = await entry.server;
  return {
    url: server.url,
    token: undefined,
    async release() {
      entry.workers -= 1;
      if (entry.workers > 0) return;
      ownApis.delete(t.db);
      await server.close();
    },
  };
}

/**
 * Starts a real worker on the test database; stop it with `await worker.stop()`. With
 * STEPWISE_TEST_WORKER_MODE=remote it runs remotely instead, against the test's API server (or one
 * started for it), with no database of its own: the same tasks, the same assertions.
 */
export async function startWorker(t: TestDatabase, tasks: TaskDefinition[], options: Partial<WorkerOptions> = {}): Promise<Worker> {
  const base = { tasks, log: quietLog, concurrency: 8, leaseMs: 5000, pollIntervalMs: 200, shutdownGraceMs: 2000 };
  const remote = WORKER_MODE === 'remote' && options.db === undefined && options.backend === undefined;
  if (!remote) {
    const worker = new Worker({ db: t.db, databaseUrl: t.url, ...base, ...options });
    await worker.start();
    return worker;
  }
  const api = await apiFor(t);
  const worker = new Worker({ ...base, ...options, remote: { url: api.url, token: api.token } });
  try {
    await worker.start();
  } catch (err) {
    await api.release();
    throw err;
  }
  const stop = worker.stop.bind(worker);
  let stopped: Promise<void> | undefined;
  worker.stop = () => (stopped ??= stop().finally(() => api.release()));
  return worker;
}
