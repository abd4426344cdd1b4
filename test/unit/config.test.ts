import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, keepFinishedMs, listenUrlOf, loadConfig } from '../../src/config';

function file(content: unknown): string {
  const p = path.join(mkdtempSync(path.join(os.tmpdir(), 'sw-config-')), 'stepwise.config.json');
  writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content));
  return p;
}

describe('configuration', () => {
  test('defaults, then the file, then the environment, then flags', () => {
    const f = file({ port: 9000, worker: { concurrency: 4 }, auth: { tokens: ['from-file'] } });
    const c = loadConfig({ file: f, env: { PORT: '9100', STEPWISE_API_TOKENS: 'a, b' }, overrides: { 'worker.concurrency': 8 } });
    expect(c.port).toBe(9100);
    expect(c.worker.concurrency).toBe(8);
    expect(c.auth.tokens).toEqual(['a', 'b']);
    expect(c.worker.leaseMs).toBe(30000);
    expect(Object.isFrozen(c.worker)).toBe(true);
  });

  test('suspended handlers kept in memory: 256 by default, 0 to always replay, never negative', () => {
    expect(loadConfig({ env: {} }).worker.keepSuspended).toBe(256);
    expect(loadConfig({ env: { STEPWISE_KEEP_SUSPENDED: '0' } }).worker.keepSuspended).toBe(0);
    expect(() => loadConfig({ env: { STEPWISE_KEEP_SUSPENDED: '-1' } })).toThrow(/keepSuspended/);
  });

  test('unknown keys and bad values are named at start-up', () => {
    expect(() => loadConfig({ file: file({ prot: 1 }), env: {} })).toThrow(/additional properties \(prot\)/);
    expect(() => loadConfig({ file: file({ worker: { concurrency: 0 } }), env: {} })).toThrow(/\/worker\/concurrency must be >= 1/);
    expect(() => loadConfig({ env: { PORT: 'eighty' } })).toThrow(ConfigError);
    expect(() => loadConfig({ file: file('{not json'), env: {} })).toThrow(/is not valid JSON/);
    expect(() => loadConfig({ file: '/nonexistent/stepwise.config.json', env: {} })).toThrow(/does not exist/);
  });

  test('retention: 30 days by default, any duration of a minute or more, or forever', () => {
    expect(keepFinishedMs(loadConfig({ env: {} }))).toBe(30 * 86_400_000);
    expect(keepFinishedMs(loadConfig({ env: { STEPWISE_RETENTION: '12h' } }))).toBe(12 * 3_600_000);
    expect(keepFinishedMs(loadConfig({ file: file({ retention: { keepFinished: '90 days' } }), env: {} }))).toBe(90 * 86_400_000);
    expect(keepFinishedMs(loadConfig({ env: { STEPWISE_RETENTION: 'forever' } }))).toBeUndefined();
    expect(loadConfig({ env: { STEPWISE_RETENTION_SWEEP_MS: '5000' } }).retention.sweepIntervalMs).toBe(5000);
    expect(() => loadConfig({ env: { STEPWISE_RETENTION: 'a while' } })).toThrow(/^STEPWISE_RETENTION must be a duration such as '30d'/);
    expect(() => loadConfig({ file: file({ retention: { keepFinished: '59s' } }), env: {} })).toThrow(/^retention.keepFinished must be at least a minute/);
    expect(() => loadConfig({ env: { STEPWISE_RETENTION_SWEEP_MS: '10' } })).toThrow(/\/retention\/sweepIntervalMs must be >= 1000/);
  });

  test('allowed hosts: none by default, a comma-separated STEPWISE_ALLOWED_HOSTS, names and *.suffix only', () => {
    expect(loadConfig({ env: {} }).http.allowedHosts).toEqual([]);
    expect(loadConfig({ env: { STEPWISE_ALLOWED_HOSTS: 'stepwise.internal, *.corp.example,*' } }).http.allowedHosts).toEqual(['stepwise.internal', '*.corp.example', '*']);
    expect(loadConfig({ file: file({ http: { allowedHosts: ['a.example'] } }), env: {} }).http.allowedHosts).toEqual(['a.example']);
    for (const bad of ['example.com:8080', 'https://example.com', 'a*.example.com', '.example.com', 'exa mple']) {
      expect(() => loadConfig({ env: { STEPWISE_ALLOWED_HOSTS: bad } })).toThrow(/\/http\/allowedHosts\/0 must match pattern/);
    }
  });

  test('metrics token: none by default, STEPWISE_METRICS_TOKEN or metrics.token, never empty', () => {
    expect(loadConfig({ env: {} }).metrics.token).toBeUndefined();
    expect(loadConfig({ env: { STEPWISE_METRICS_TOKEN: 'scrape-me' } }).metrics.token).toBe('scrape-me');
    expect(loadConfig({ file: file({ metrics: { token: 'from-file' } }), env: {} }).metrics.token).toBe('from-file');
    expect(loadConfig({ env: { STEPWISE_METRICS_TOKEN: '' } }).metrics.token).toBeUndefined();
    expect(() => loadConfig({ file: file({ metrics: { token: '' } }), env: {} })).toThrow(/\/metrics\/token must NOT have fewer than 1 characters/);
    expect(() => loadConfig({ file: file({ metrics: { tokens: ['x'] } }), env: {} })).toThrow(/additional properties \(tokens\)/);
  });

  test('worker tokens: none by default, a comma-separated STEPWISE_WORKER_TOKENS or auth.workerTokens, never empty', () => {
    expect(loadConfig({ env: {} }).auth).toEqual({ tokens: [], workerTokens: [] });
    expect(loadConfig({ env: { STEPWISE_WORKER_TOKENS: 'w1, w2,' } }).auth.workerTokens).toEqual(['w1', 'w2']);
    expect(loadConfig({ file: file({ auth: { workerTokens: ['from-file'] } }), env: {} }).auth).toEqual({ tokens: [], workerTokens: ['from-file'] });
    expect(loadConfig({ file: file({ auth: { workerTokens: ['from-file'] } }), env: { STEPWISE_WORKER_TOKENS: 'from-env' } }).auth.workerTokens).toEqual(['from-env']);
    expect(() => loadConfig({ file: file({ auth: { workerTokens: [''] } }), env: {} })).toThrow(/\/auth\/workerTokens\/0 must NOT have fewer than 1 characters/);
    expect(() => loadConfig({ file: file({ auth: { workerTokens: 'w1' } }), env: {} })).toThrow(/\/auth\/workerTokens must be array/);
  });

  test('a worker token that is also a client token or the metrics token is refused, without printing it', () => {
    for (const env of [
      { STEPWISE_API_TOKENS: 'c1,shared-secret', STEPWISE_WORKER_TOKENS: 'shared-secret' },
      { STEPWISE_METRICS_TOKEN: 'shared-secret', STEPWISE_WORKER_TOKENS: 'w1,shared-secret' },
    ]) {
      let message = '';
      expect(() => {
        try {
          loadConfig({ env });
        } catch (err) {
          message = (err as Error).message;
          throw err;
        }
      }).toThrow(ConfigError);
      expect(message).toMatch(/^a worker token \(auth\.workerTokens, STEPWISE_WORKER_TOKENS\) must differ from every client token/);
      expect(message).not.toContain('shared-secret');
    }
    // The metrics token may still be a client token: both open /metrics.
    expect(loadConfig({ env: { STEPWISE_API_TOKENS: 'c1', STEPWISE_METRICS_TOKEN: 'c1', STEPWISE_WORKER_TOKENS: 'w1' } }).auth.workerTokens).toEqual(['w1']);
  });

  test('limits: 4 MiB per value and 10,000 operations by default, from the file or the environment, positive integers', () => {
    expect(loadConfig({ env: {} }).limits).toEqual({ valueBytes: 4194304, operations: 10000 });
    const fromEnv = loadConfig({ env: { STEPWISE_MAX_VALUE_BYTES: '1048576', STEPWISE_MAX_OPERATIONS: '500' } }).limits;
    expect(fromEnv).toEqual({ valueBytes: 1048576, operations: 500 });
    expect(loadConfig({ file: file({ limits: { operations: 20000 } }), env: {} }).limits).toEqual({ valueBytes: 4194304, operations: 20000 });
    expect(() => loadConfig({ env: { STEPWISE_MAX_VALUE_BYTES: '0' } })).toThrow(/\/limits\/valueBytes must be >= 1/);
    expect(() => loadConfig({ env: { STEPWISE_MAX_OPERATIONS: '-5' } })).toThrow(/\/limits\/operations must be >= 1/);
    expect(() => loadConfig({ env: { STEPWISE_MAX_VALUE_BYTES: '4MB' } })).toThrow(/^STEPWISE_MAX_VALUE_BYTES must be an integer/);
    expect(() => loadConfig({ file: file({ limits: { valueBytes: 1.5 } }), env: {} })).toThrow(/\/limits\/valueBytes must be integer/);
    // jsonb holds at most 255 MiB; sequence numbers are a PostgreSQL integer.
    expect(() => loadConfig({ env: { STEPWISE_MAX_VALUE_BYTES: '268435456' } })).toThrow(/\/limits\/valueBytes must be <= 268435455/);
    expect(() => loadConfig({ env: { STEPWISE_MAX_OPERATIONS: '2147483648' } })).toThrow(/\/limits\/operations must be <= 2147483647/);
    expect(() => loadConfig({ file: file({ limits: { bytes: 1 } }), env: {} })).toThrow(/additional properties \(bytes\)/);
  });

  test('pooler: none by default, transaction from STEPWISE_DB_POOLER or db.pooler, nothing else', () => {
    expect(loadConfig({ env: {} }).db.pooler).toBe('none');
    expect(loadConfig({ env: { STEPWISE_DB_POOLER: 'transaction' } }).db.pooler).toBe('transaction');
    expect(loadConfig({ file: file({ db: { pooler: 'transaction' } }), env: {} }).db.pooler).toBe('transaction');
    expect(() => loadConfig({ env: { STEPWISE_DB_POOLER: 'session' } })).toThrow(/\/db\/pooler must be equal to constant/);
  });

  test('LISTEN goes to STEPWISE_LISTEN_URL or db.listenUrl, else to the database URL; never elsewhere for the embedded database', () => {
    const pooled = 'postgres://u:p@pgbouncer:6432/app';
    const direct = 'postgres://u:p@postgres:5432/app';
    expect(listenUrlOf(loadConfig({ env: { DATABASE_URL: pooled } }), pooled)).toBe(pooled);
    expect(listenUrlOf(loadConfig({ env: { DATABASE_URL: pooled, STEPWISE_LISTEN_URL: direct } }), pooled)).toBe(direct);
    expect(listenUrlOf(loadConfig({ file: file({ databaseUrl: pooled, db: { listenUrl: direct } }), env: {} }), pooled)).toBe(direct);
    const embedded = 'postgres://postgres:postgres@127.0.0.1:54329/stepwise';
    expect(listenUrlOf(loadConfig({ env: { STEPWISE_LISTEN_URL: direct } }), embedded)).toBe(embedded);
  });
  test('database timeouts: production defaults, from the environment, and they must nest', () => {
    expect(loadConfig({ env: {} }).db).toMatchObject({ acquireTimeoutMs: 5000, connectTimeoutMs: 5000, statementTimeoutMs: 15000, idleInTransactionTimeoutMs: 10000, queryTimeoutMs: 20000, keepAliveDelayMs: 10000 });
    const env = { STEPWISE_DB_STATEMENT_TIMEOUT_MS: '1000', STEPWISE_DB_QUERY_TIMEOUT_MS: '1500', STEPWISE_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '1000', STEPWISE_DB_CONNECT_TIMEOUT_MS: '700', STEPWISE_DB_ACQUIRE_TIMEOUT_MS: '800' };
    expect(loadConfig({ env }).db).toMatchObject({ statementTimeoutMs: 1000, queryTimeoutMs: 1500, idleInTransactionTimeoutMs: 1000, connectTimeoutMs: 700, acquireTimeoutMs: 800 });
    // The server's statement_timeout must fire before the client gives a silent statement up.
    expect(() => loadConfig({ env: { STEPWISE_DB_STATEMENT_TIMEOUT_MS: '20000' } })).toThrow(/queryTimeoutMs \(20000\) must be longer than db.statementTimeoutMs \(20000\)/);
    // A lost COMMIT must find its session ended before the client gives up.
    expect(() => loadConfig({ env: { STEPWISE_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '30000' } })).toThrow(/idleInTransactionTimeoutMs \(30000\) must be set and at most db.queryTimeoutMs/);
    expect(loadConfig({ env: { STEPWISE_DB_QUERY_TIMEOUT_MS: '0', STEPWISE_DB_STATEMENT_TIMEOUT_MS: '0' } }).db).toMatchObject({ queryTimeoutMs: 0, statementTimeoutMs: 0 });
  });

  test('list and bulk bounds: 10,000 offset, batches of 100 within 5 s, from the environment', () => {
    expect(loadConfig({ env: {} }).http).toMatchObject({ listMaxOffset: 10000, bulkBatchSize: 100, bulkBudgetMs: 5000 });
    expect(loadConfig({ env: { STEPWISE_LIST_MAX_OFFSET: '50', STEPWISE_BULK_BATCH_SIZE: '10', STEPWISE_BULK_BUDGET_MS: '0' } }).http).toMatchObject({ listMaxOffset: 50, bulkBatchSize: 10, bulkBudgetMs: 0 });
    expect(() => loadConfig({ env: { STEPWISE_BULK_BATCH_SIZE: '0' } })).toThrow(/bulkBatchSize must be >= 1/);
  });
});
