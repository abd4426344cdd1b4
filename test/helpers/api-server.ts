import { Writable } from 'node:stream';
import { startApiServer, type ApiServer } from '../../src/api/server';
import { createStepwiseClient, type StepwiseClient } from '../../src/client';
import { loadConfig, type Config } from '../../src/config';
import { createLogger, type Logger } from '../../src/logger';
import type { Db } from '../../src/store/db';
import { createTestDatabase, type TestDatabase } from './db';
import { findSpecViolations, recordResponse, SpecViolationError, type RecordedResponse } from './spec-matcher';
import { useApiForRemoteWorkers } from './worker';

/** Collects a logger's JSON lines in memory (for tests that read the log). */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    done();
  }
  get text(): string {
    return this.lines.join('\n');
  }
}

export interface TestApi {
  t: TestDatabase;
  db: Db;
  api: ApiServer;
  config: Readonly<Config>;
  log: Logger;
  logs: LogCapture;
  /** The typed client; every answer it gets is checked against openapi.yaml. */
  client: StepwiseClient;
  /** A client with another token (or none), equally spec-checked. */
  clientWith(token: string | undefined): StepwiseClient;
  /** A fetch for custom clients: every answer is checked against openapi.yaml like the others. */
  fetch(request: Request): Promise<Response>;
  /** Plain fetch for requests the typed client cannot make (malformed, wrong types); spec-checked too. */
  call(method: string, path: string, init?: { body?: string | Blob; headers?: Record<string, string> }): Promise<RecordedResponse>;
  /** Every answer any of the above saw that broke the spec (also thrown at the call). */
  violations: string[];
  close(): Promise<void>;
}

export interface TestApiOptions {
  /** Client tokens (`auth.tokens`); `client` uses the first. */
  tokens?: string[];
  /** Worker tokens (`auth.workerTokens`): the worker protocol only. */
  workerTokens?: string[];
  /** `metrics.token`: GET /metrics then needs it (or an API token). */
  metricsToken?: string;
  basePath?: string;
  http?: Partial<Config['http']>;
  webhooks?: Partial<Config['webhooks']>;
  limits?: Partial<Config['limits']>;
  /** The `db` settings (timeouts); the pool itself is `db`'s or the test database's. */
  dbConfig?: Partial<Config['db']>;
  logLevel?: string;
  /** Use this database pool (and URL) instead of a fresh test database. */
  db?: { db: Db; url: string };
  /** How often the server tells workers it holds streams (ApiServerDeps.streamsAnnounceMs). */
  streamsAnnounceMs?: number;
}

/**
 * A real API server on port 0 over a database of its own. Every response that passes through
 * `client`, `clientWith` or `call` is checked against openapi.yaml; a violation throws at the call
 * site and is also kept in `violations`, which `close()` asserts empty.
 */
export async function startTestApi(options: TestApiOptions = {}): Promise<TestApi> {
  const t = options.db ? undefined : await createTestDatabase();
  const db = options.db?.db ?? (t as TestDatabase).db;
  const url = options.db?.url ?? (t as TestDatabase).url;
  const config = loadConfig({
    env: {},
    overrides: {
      port: 0,
      basePath: options.basePath ?? '',
      'auth.tokens': options.tokens ?? [],
      'auth.workerTokens': options.workerTokens ?? [],
      'metrics.token': options.metricsToken,
      ...Object.fromEntries(Object.entries(options.http ?? {}).map(([k, v]) => [`http.${k}`, v])),
      ...Object.fromEntries(Object.entries(options.webhooks ?? {}).map(([k, v]) => [`webhooks.${k}`, v])),
      ...Object.fromEntries(Object.entries(options.limits ?? {}).map(([k, v]) => [`limits.${k}`, v])),
      ...Object.fromEntries(Object.entries(options.dbConfig ?? {}).map(([k, v]) => [`db.${k}`, v])),
    },
  });
  const logs = new LogCapture();
  const log = createLogger({ level: options.logLevel ?? 'info', destination: logs });
  const api = await startApiServer({ config, databaseUrl: url, db, log, streamsAnnounceMs: options.streamsAnnounceMs });
  const base = new URL(api.url);
  const violations: string[] = [];
  // Remote test workers (STEPWISE_TEST_WORKER_MODE=remote) on this database talk to this server.
  useApiForRemoteWorkers(db, { url: api.url, token: options.tokens?.[0] });

  const check = (rec: RecordedResponse) => {
    const problems = findSpecViolations(rec);
    if (problems.length > 0) {
      const message = `${rec.method} ${rec.path} → ${rec.status}: ${problems.join('; ')}`;
      violations.push(message);
      throw new SpecViolationError(message);
    }
  };
  const checkingFetch = async (request: Request): Promise<Response> => {
    const response = await fetch(request);
    const path = new URL(request.url).pathname.slice(base.pathname.replace(/\/$/, '').length);
    // An event stream's body lasts as long as the stream: its status, headers and media type are
    // checked at once (its text is any string), and its body is left to the caller alone.
    const streaming = response.ok && (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
    const rec = streaming
      ? { method: request.method.toUpperCase(), path, status: response.status, headers: response.headers, text: '', body: undefined }
      : await recordResponse(request.method, path, response.clone());
    check(rec);
    return response;
  };
  const clientWith = (token: string | undefined) => createStepwiseClient({ baseUrl: api.url, token, fetch: checkingFetch });
  return {
    t: t as TestDatabase,
    db,
    api,
    config,
    log,
    logs,
    client: clientWith(options.tokens?.[0]),
    clientWith,
    violations,
    fetch: checkingFetch,
    async call(method, path, init = {}) {
      const response = await fetch(`${api.url}${path}`, { method, body: init.body, headers: init.headers });
      const rec = await recordResponse(method, path, response);
      check(rec);
      return rec;
    },
    async close() {
      useApiForRemoteWorkers(db, undefined);
      await api.close();
      if (t) await t.drop();
      expect(violations).toEqual([]);
    },
  };
}
