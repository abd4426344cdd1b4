import { readFileSync } from 'node:fs';
import { Type, type Static } from '@sinclair/typebox';
import { Ajv2020 } from 'ajv/dist/2020';
import { parseDuration } from './domain/duration';

/**
 * Everything configurable, with defaults. The file (`stepwise.config.json`, or `--config`) is checked
 * against this schema; environment variables override it; flags override both.
 */
export const ConfigSchema = Type.Object(
  {
    databaseUrl: Type.Optional(Type.String({ minLength: 1, description: 'PostgreSQL URL; embedded PostgreSQL when absent (dev only)' })),
    host: Type.String({ default: '127.0.0.1' }),
    port: Type.Integer({ minimum: 0, maximum: 65535, default: 8080 }),
    basePath: Type.String({ default: '', pattern: '^(/[A-Za-z0-9._~-]+)*$' }),
    logLevel: Type.Union(
      ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
      { default: 'info' },
    ),
    auth: Type.Object(
      {
        tokens: Type.Array(Type.String({ minLength: 1 }), {
          default: [],
          description: 'client tokens: every operation except the worker protocol. With no token of either kind, auth is off',
        }),
        workerTokens: Type.Array(Type.String({ minLength: 1 }), {
          default: [],
          description: "worker tokens: the operations openapi.yaml tags 'Worker protocol', and nothing else",
        }),
      },
      { default: {}, additionalProperties: false },
    ),
    http: Type.Object(
      {
        bodyLimitBytes: Type.Integer({ minimum: 1, default: 1048576 }),
        bodyDiscardBytes: Type.Integer({
          minimum: 0,
          default: 33554432,
          description:
            'how much of a body over bodyLimitBytes the server reads and throws away before its 413, so that a client still writing the body can read the answer; past it the connection closes after the answer',
        }),
        jsonMaxDepth: Type.Integer({ minimum: 1, maximum: 10000, default: 64 }),
        headersTimeoutMs: Type.Integer({ minimum: 1000, default: 20000 }),
        requestTimeoutMs: Type.Integer({ minimum: 1000, default: 30000 }),
        keepAliveTimeoutMs: Type.Integer({ minimum: 0, default: 5000 }),
        waitPollIntervalMs: Type.Integer({ minimum: 100, default: 5000 }),
        listMaxOffset: Type.Integer({
          minimum: 0,
          maximum: 2147483647,
          default: 10000,
          description: 'the largest `offset` GET /executions accepts (a deeper one is refused with 422: page by `cursor` instead); an offset walks that many index entries',
        }),
        bulkBatchSize: Type.Integer({ minimum: 1, maximum: 10000, default: 100, description: 'executions a bulk action (bulk-cancel, bulk-retry, bulk-upgrade) finds and changes per batch' }),
        bulkBudgetMs: Type.Integer({
          minimum: 0,
          default: 5000,
          description: 'time after which a bulk action starts no further batch and answers with what it did and a `next_cursor` to continue from (0: one batch per request)',
        }),
        streamKeepAliveMs: Type.Integer({ minimum: 10, default: 15000, description: 'time between the keep-alive comments of an open event stream (GET /executions/{id}/stream, /executions/changes)' }),
        allowedHosts: Type.Array(Type.String({ pattern: '^(\\*|(\\*\\.)?[A-Za-z0-9_-][A-Za-z0-9_.-]*)$' }), {
          default: [],
          description:
            "host names (without port) browsers may address the server by, besides IP addresses, localhost and *.localhost: 'stepwise.internal', '*.example.com' (its subdomains) or '*' (any)",
        }),
      },
      { default: {}, additionalProperties: false },
    ),
    metrics: Type.Object(
      {
        token: Type.Optional(Type.String({ minLength: 1, description: 'when set, GET /metrics needs this bearer token (or an API token)' })),
      },
      { default: {}, additionalProperties: false },
    ),
    db: Type.Object(
      {
        poolMax: Type.Integer({ minimum: 1, default: 10 }),
        acquireTimeoutMs: Type.Integer({ minimum: 100, default: 5000, description: 'how long a statement may wait for a free pool connection (or a new one) before its request answers 503' }),
        connectTimeoutMs: Type.Integer({ minimum: 100, default: 5000, description: 'how long opening a connection may take, from the TCP connect to the server accepting the session' }),
        // Sent as startup parameters, so PostgreSQL itself ends a statement or an idle transaction that
        // outlives them (a transaction pooler refuses unknown startup parameters: set them on the role).
        statementTimeoutMs: Type.Integer({
          minimum: 0,
          default: 15000,
          description: "PostgreSQL's statement_timeout for the pool's connections: a statement running longer is cancelled by the server and rolled back (0: none). Not sent with db.pooler 'transaction'",
        }),
        idleInTransactionTimeoutMs: Type.Integer({
          minimum: 0,
          default: 10000,
          description: "PostgreSQL's idle_in_transaction_session_timeout for the pool's connections: a transaction left waiting for its next statement this long is rolled back and its session closed (0: none). Not sent with db.pooler 'transaction'",
        }),
        queryTimeoutMs: Type.Integer({
          minimum: 0,
          default: 20000,
          description:
            'how long a statement may go without a byte of answer before the client gives it up and closes its connection, so the server rolls back whatever it had begun (0: never). Longer than statementTimeoutMs, so a slow statement is cancelled by the server first, and not shorter than idleInTransactionTimeoutMs',
        }),
        keepAliveDelayMs: Type.Integer({ minimum: 1000, default: 10000, description: 'idle time before TCP keep-alive probes start on database connections (a peer that vanished is noticed)' }),
        // A transaction pooler hands each transaction whichever server connection is free, so a
        // statement prepared by name on one may be missing (or already there) on the next.
        pooler: Type.Union([Type.Literal('none'), Type.Literal('transaction')], {
          default: 'none',
          description:
            "what databaseUrl points at: 'none' (PostgreSQL, or a pooler in session mode) or 'transaction' (PgBouncer in transaction mode, RDS Proxy, Supavisor): then no statement is prepared by name, each is parsed anew, and nothing relies on a session. Migrations need no more than a transaction either",
        }),
        embeddedPort: Type.Optional(
          Type.Integer({
            minimum: 1,
            maximum: 65535,
            description: "port of the embedded PostgreSQL of `stepwise dev` (no databaseUrl). Unset: 54329, or any free port when that one is taken; set: that port, or a start-up error when it is taken",
          }),
        ),
        listenUrl: Type.Optional(
          Type.String({
            minLength: 1,
            description:
              "PostgreSQL URL of the LISTEN connection each API server and worker keeps (one per process, plus one per worker's webhook deliverer): it must reach the database directly, never through a transaction pooler, which would lose the LISTEN between transactions. Default: databaseUrl (ignored without one: the embedded database)",
          }),
        ),
      },
      { default: {}, additionalProperties: false },
    ),
    worker: Type.Object(
      {
        concurrency: Type.Integer({ minimum: 1, default: 32 }),
        prefetch: Type.Optional(Type.Integer({ minimum: 0, description: 'executions claimed ahead of free slots (default: automatic, 2 to 8 times the concurrency, by how fast the worker starts handlers)' })),
        prefetchHoldMs: Type.Integer({ minimum: 50, default: 1000, description: 'a prefetched execution not started within this time goes back to the queue' }),
        keepSuspended: Type.Integer({ minimum: 0, default: 256, description: 'suspended handlers kept in memory, resumed in place (no replay) when this worker claims them again; 0 always replays' }),
        leaseMs: Type.Integer({ minimum: 500, default: 30000 }),
        pollIntervalMs: Type.Integer({ minimum: 50, default: 1000 }),
        shutdownGraceMs: Type.Integer({ minimum: 0, default: 10000 }),
        metricsPort: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, description: 'serve /metrics on this port in worker-only processes' })),
      },
      { default: {}, additionalProperties: false },
    ),
    retention: Type.Object(
      {
        keepFinished: Type.String({
          default: '30d',
          description: "how long finished executions (completed, failed, cancelled) are kept before workers delete them: a duration of at least a minute ('30d', '12h'), or 'forever'",
        }),
        sweepIntervalMs: Type.Integer({ minimum: 1000, default: 60000, description: 'time between the deletion sweeps of each worker process' }),
      },
      { default: {}, additionalProperties: false },
    ),
    webhooks: Type.Object(
      {
        allowPrivateTargets: Type.Boolean({
          default: false,
          description:
            'let webhooks target private, loopback and unique-local addresses (10/8, 172.16/12, 192.168/16, 100.64/10, 127/8, ::1, fc00::/7); link-local and cloud metadata addresses are refused always. `stepwise dev` allows them',
        }),
        concurrency: Type.Integer({ minimum: 1, maximum: 1000, default: 16, description: 'webhook deliveries each worker process attempts at once' }),
        timeoutMs: Type.Integer({ minimum: 100, maximum: 120000, default: 10000, description: 'time each delivery attempt may take, from DNS lookup to the answer' }),
        retryBaseMs: Type.Integer({
          minimum: 1,
          default: 5000,
          description: 'the first retry after this long (with jitter); later ones after 6, 24, 120, 360, 720, 1440, 2880 and then 4320 times it (5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 6 h)',
        }),
        retryForMs: Type.Integer({ minimum: 1, default: 86400000, description: 'a delivery not answered with 2xx this long after its creation is failed' }),
        pollIntervalMs: Type.Integer({ minimum: 50, default: 1000, description: 'how often deliverers look for due deliveries without a notification' }),
      },
      { default: {}, additionalProperties: false },
    ),
    limits: Type.Object(
      {
        // jsonb holds at most 255 MiB; a larger limit could only fail in the database.
        valueBytes: Type.Integer({
          minimum: 1,
          maximum: 268435455,
          default: 4194304,
          description: 'the largest step result, handler output and event payload, in bytes of JSON (UTF-8)',
        }),
        // Sequence numbers are a PostgreSQL integer.
        operations: Type.Integer({
          minimum: 1,
          maximum: 2147483647,
          default: 10000,
          description: 'the most durable operations (steps, sleeps, event waits, child executions) one execution may record',
        }),
      },
      { default: {}, additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

export type Config = Static<typeof ConfigSchema>;

/** Environment variable -> config path. Only these are read. */
const ENV_MAP: ReadonlyArray<readonly [string, string, 'string' | 'int' | 'list' | 'bool']> = [
  ['DATABASE_URL', 'databaseUrl', 'string'],
  ['HOST', 'host', 'string'],
  ['PORT', 'port', 'int'],
  ['STEPWISE_BASE_PATH', 'basePath', 'string'],
  ['LOG_LEVEL', 'logLevel', 'string'],
  ['STEPWISE_API_TOKENS', 'auth.tokens', 'list'],
  ['STEPWISE_WORKER_TOKENS', 'auth.workerTokens', 'list'],
  ['STEPWISE_BODY_LIMIT_BYTES', 'http.bodyLimitBytes', 'int'],
  ['STEPWISE_BODY_DISCARD_BYTES', 'http.bodyDiscardBytes', 'int'],
  ['STEPWISE_JSON_MAX_DEPTH', 'http.jsonMaxDepth', 'int'],
  ['STEPWISE_ALLOWED_HOSTS', 'http.allowedHosts', 'list'],
  ['STEPWISE_STREAM_KEEPALIVE_MS', 'http.streamKeepAliveMs', 'int'],
  ['STEPWISE_LIST_MAX_OFFSET', 'http.listMaxOffset', 'int'],
  ['STEPWISE_BULK_BATCH_SIZE', 'http.bulkBatchSize', 'int'],
  ['STEPWISE_BULK_BUDGET_MS', 'http.bulkBudgetMs', 'int'],
  ['STEPWISE_METRICS_TOKEN', 'metrics.token', 'string'],
  ['STEPWISE_DB_POOL_MAX', 'db.poolMax', 'int'],
  ['STEPWISE_DB_ACQUIRE_TIMEOUT_MS', 'db.acquireTimeoutMs', 'int'],
  ['STEPWISE_DB_CONNECT_TIMEOUT_MS', 'db.connectTimeoutMs', 'int'],
  ['STEPWISE_DB_STATEMENT_TIMEOUT_MS', 'db.statementTimeoutMs', 'int'],
  ['STEPWISE_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS', 'db.idleInTransactionTimeoutMs', 'int'],
  ['STEPWISE_DB_QUERY_TIMEOUT_MS', 'db.queryTimeoutMs', 'int'],
  ['STEPWISE_DB_KEEPALIVE_MS', 'db.keepAliveDelayMs', 'int'],
  ['STEPWISE_DB_POOLER', 'db.pooler', 'string'],
  ['STEPWISE_LISTEN_URL', 'db.listenUrl', 'string'],
  ['STEPWISE_EMBEDDED_PORT', 'db.embeddedPort', 'int'],
  ['STEPWISE_CONCURRENCY', 'worker.concurrency', 'int'],
  ['STEPWISE_PREFETCH', 'worker.prefetch', 'int'],
  ['STEPWISE_PREFETCH_HOLD_MS', 'worker.prefetchHoldMs', 'int'],
  ['STEPWISE_KEEP_SUSPENDED', 'worker.keepSuspended', 'int'],
  ['STEPWISE_LEASE_MS', 'worker.leaseMs', 'int'],
  ['STEPWISE_POLL_INTERVAL_MS', 'worker.pollIntervalMs', 'int'],
  ['STEPWISE_SHUTDOWN_GRACE_MS', 'worker.shutdownGraceMs', 'int'],
  ['STEPWISE_METRICS_PORT', 'worker.metricsPort', 'int'],
  ['STEPWISE_RETENTION', 'retention.keepFinished', 'string'],
  ['STEPWISE_RETENTION_SWEEP_MS', 'retention.sweepIntervalMs', 'int'],
  ['STEPWISE_MAX_VALUE_BYTES', 'limits.valueBytes', 'int'],
  ['STEPWISE_MAX_OPERATIONS', 'limits.operations', 'int'],
  ['STEPWISE_WEBHOOKS_ALLOW_PRIVATE', 'webhooks.allowPrivateTargets', 'bool'],
  ['STEPWISE_WEBHOOKS_CONCURRENCY', 'webhooks.concurrency', 'int'],
  ['STEPWISE_WEBHOOKS_TIMEOUT_MS', 'webhooks.timeoutMs', 'int'],
  ['STEPWISE_WEBHOOKS_RETRY_BASE_MS', 'webhooks.retryBaseMs', 'int'],
  ['STEPWISE_WEBHOOKS_RETRY_FOR_MS', 'webhooks.retryForMs', 'int'],
];

const TRUE_WORDS = new Set(['1', 'true', 'yes', 'on']);
const FALSE_WORDS = new Set(['0', 'false', 'no', 'off']);

/** The shortest retention: a long-poll answered at completion must still find its execution. */
const MIN_RETENTION_MS = 60_000;

/**
 * How long finished executions are kept, in milliseconds, or undefined for 'forever'. Throws a
 * ConfigError naming `what` when the value is neither.
 */
export function parseRetention(value: string, what = 'retention.keepFinished'): number | undefined {
  if (value.trim().toLowerCase() === 'forever') return undefined;
  let result: number;
  try {
    result = parseDuration(value.trim());
  } catch {
    throw new ConfigError(`${what} must be a duration such as '30d' or '12h', or 'forever'; got ${JSON.stringify(value)}`);
  }
  if (result < MIN_RETENTION_MS) throw new ConfigError(`${what} must be at least a minute (or 'forever'); got ${JSON.stringify(value)}`);
  return result;
}

/**
 * The URL of the LISTEN connections: `db.listenUrl`, else the pool's own `databaseUrl` (always the
 * latter for the embedded database of `stepwise dev`, which no pooler stands in front of).
 */
export function listenUrlOf(config: Readonly<Config>, databaseUrl: string): string {
  return (config.databaseUrl && config.db.listenUrl) || databaseUrl;
}

/** The retention period of `config` in milliseconds, or undefined when finished executions are kept forever. */
export function keepFinishedMs(config: Readonly<Config>): number | undefined {
  return parseRetention(config.retention.keepFinished);
}

export class ConfigError extends Error {}

/**
 * One token, one role: a worker token that is also a client or the metrics token would open more
 * than the worker protocol, so it is refused (without printing it: tokens never reach output).
 */
function checkTokenRoles(config: Config): void {
  const others = new Set([...config.auth.tokens, ...(config.metrics.token === undefined ? [] : [config.metrics.token])]);
  if (config.auth.workerTokens.some((t) => others.has(t))) {
    throw new ConfigError('a worker token (auth.workerTokens, STEPWISE_WORKER_TOKENS) must differ from every client token (auth.tokens, STEPWISE_API_TOKENS) and from metrics.token');
  }
}

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let obj = target;
  for (const part of parts.slice(0, -1)) {
    if (typeof obj[part] !== 'object' || obj[part] === null) obj[part] = {};
    obj = obj[part] as Record<string, unknown>;
  }
  obj[parts[parts.length - 1]] = value;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

export interface LoadConfigOptions {
  /** Path of a JSON config file; when absent, `stepwise.config.json` in the cwd is read if present. */
  file?: string;
  env?: NodeJS.ProcessEnv;
  /** Values from command-line flags, highest precedence. */
  overrides?: Record<string, unknown>;
  /** Defaults of the command (by path), below the file, the environment and the flags: `stepwise dev`'s. */
  defaults?: Record<string, unknown>;
}

function getPath(source: Record<string, unknown>, path: string): unknown {
  let value: unknown = source;
  for (const part of path.split('.')) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/**
 * The database timeouts must nest: the server's statement_timeout fires before the client gives a
 * silent statement up (so a slow statement is cancelled, and said so, rather than cut), and a
 * transaction whose COMMIT is lost in the network is ended by idle_in_transaction_session_timeout
 * no later than the client gives up, so that COMMIT cannot land after the request answered 503.
 */
function checkDbTimeouts(db: Config['db']): void {
  if (db.queryTimeoutMs === 0) return;
  if (db.statementTimeoutMs > 0 && db.queryTimeoutMs <= db.statementTimeoutMs) {
    throw new ConfigError(`db.queryTimeoutMs (${db.queryTimeoutMs}) must be longer than db.statementTimeoutMs (${db.statementTimeoutMs}), or 0`);
  }
  if (db.idleInTransactionTimeoutMs === 0 || db.idleInTransactionTimeoutMs > db.queryTimeoutMs) {
    throw new ConfigError(`db.idleInTransactionTimeoutMs (${db.idleInTransactionTimeoutMs}) must be set and at most db.queryTimeoutMs (${db.queryTimeoutMs}) while queryTimeoutMs is set`);
  }
}

/** Parses file, environment and flags once into a typed, frozen object; a bad value throws ConfigError. */
export function loadConfig(options: LoadConfigOptions = {}): Readonly<Config> {
  const env = options.env ?? process.env;
  let raw: Record<string, unknown> = {};
  const file = options.file ?? env.STEPWISE_CONFIG;
  const candidate = file ?? 'stepwise.config.json';
  try {
    raw = JSON.parse(readFileSync(candidate, 'utf8')) as Record<string, unknown>;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError(`config file ${candidate} must hold a JSON object`);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && file === undefined) raw = {};
    else if (code === 'ENOENT') throw new ConfigError(`config file ${candidate} does not exist`);
    else throw new ConfigError(`config file ${candidate} is not valid JSON: ${(err as Error).message}`);
  }
  for (const [path, value] of Object.entries(options.defaults ?? {})) if (getPath(raw, path) === undefined) setPath(raw, path, value);
  for (const [name, path, kind] of ENV_MAP) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    if (kind === 'int') {
      if (!/^-?\d+$/.test(value.trim())) throw new ConfigError(`${name} must be an integer, got ${JSON.stringify(value)}`);
      setPath(raw, path, Number.parseInt(value, 10));
    } else if (kind === 'bool') {
      const word = value.trim().toLowerCase();
      if (!TRUE_WORDS.has(word) && !FALSE_WORDS.has(word)) throw new ConfigError(`${name} must be true or false (1/0, yes/no, on/off), got ${JSON.stringify(value)}`);
      setPath(raw, path, TRUE_WORDS.has(word));
    } else if (kind === 'list') {
      setPath(raw, path, value.split(',').map((s) => s.trim()).filter(Boolean));
    } else setPath(raw, path, value);
  }
  for (const [path, value] of Object.entries(options.overrides ?? {})) if (value !== undefined) setPath(raw, path, value);
  const ajv = new Ajv2020({ useDefaults: true, allErrors: true, strict: false });
  const validate = ajv.compile(ConfigSchema);
  if (!validate(raw)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}${e.params && 'additionalProperty' in e.params ? ` (${String(e.params.additionalProperty)})` : ''}`);
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  }
  const config = raw as Config;
  checkTokenRoles(config);
  checkDbTimeouts(config.db);
  parseRetention(config.retention.keepFinished, env.STEPWISE_RETENTION ? 'STEPWISE_RETENTION' : 'retention.keepFinished');
  config.basePath = config.basePath.replace(/\/+$/, '');
  return deepFreeze(config);
}
