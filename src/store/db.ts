import knex, { type Knex } from 'knex';
import pg from 'pg';
import type { Config } from '../config';
import type { Logger } from '../logger';
import { classifyConnectionFailures, connectionFailure, isStalePlan } from './db-errors';
import { createPoolGuard } from './pool-guard';

export type Db = Knex;

/**
 * What a pool's URL reaches: PostgreSQL itself ('none', or a pooler in session mode), or a pooler in
 * transaction mode ('transaction'), which may run each transaction on another server connection.
 */
export type Pooler = 'none' | 'transaction';

// Return bigint counts (count(*)) as numbers: totals never approach 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number.parseInt(v, 10));

export interface DbOptions {
  url: string;
  poolMin?: number;
  poolMax?: number;
  /** How long a query may wait for a free connection before failing (ms). */
  acquireTimeoutMs?: number;
  applicationName?: string;
  /**
   * Where knex's own messages go (pool connection errors during an outage). Without it they are
   * dropped: knex would print them, stacks included, with console.log. The errors that matter
   * surface anyway through the calls that hit them.
   */
  log?: Logger;
  /** 'transaction': no statement is prepared by name on this pool (see preparedRows). Default 'none'. */
  pooler?: Pooler;
  /** What bounds each statement's time (see DbTimeouts); each one absent is off, connectMs 5 s. */
  timeouts?: Partial<DbTimeouts>;
}

/** The bounds a pool keeps its statements within (config.ts's `db` section says what each does). */
export interface DbTimeouts {
  connectMs: number;
  /** PostgreSQL's statement_timeout (0: none). */
  statementMs: number;
  /** PostgreSQL's idle_in_transaction_session_timeout (0: none). */
  idleInTransactionMs: number;
  /** Silence from the database, while a statement waits, after which the connection is closed (0: never). */
  queryMs: number;
  keepAliveDelayMs: number;
}

/** The pool options of `config` for `url`: the pool's size, pooler and every timeout. */
export function dbOptionsOf(config: Readonly<Config>, url: string, log?: Logger): DbOptions {
  const c = config.db;
  return {
    url,
    poolMax: c.poolMax,
    acquireTimeoutMs: c.acquireTimeoutMs,
    pooler: c.pooler,
    log,
    timeouts: { connectMs: c.connectTimeoutMs, statementMs: c.statementTimeoutMs, idleInTransactionMs: c.idleInTransactionTimeoutMs, queryMs: c.queryTimeoutMs, keepAliveDelayMs: c.keepAliveDelayMs },
  };
}

/** The pools behind a transaction pooler: nothing may outlive a transaction on their connections. */
const pooledDbs = new WeakSet<Knex>();

/**
 * True when `db` reaches PostgreSQL through a transaction pooler: a statement prepared on one of its
 * connections may be missing from the next transaction's server connection, or already there.
 */
export function isBehindTransactionPooler(db: Knex): boolean {
  return pooledDbs.has(db);
}

/** Knex's messages as one structured line each: the message only, never a stack. */
function knexLog(log: Logger | undefined): Knex.Config['log'] {
  const text = (m: unknown) => (m instanceof Error ? m.message : typeof m === 'string' ? m.split('\n')[0] : String(m)).slice(0, 500);
  return {
    warn: (m: unknown) => log?.warn({ err: text(m) }, 'database client warning'),
    error: (m: unknown) => log?.warn({ err: text(m) }, 'database client error'),
    deprecate: (m: unknown) => log?.debug({ msg: text(m) }, 'database client deprecation'),
    debug: (m: unknown) => log?.debug({ msg: text(m) }, 'database client debug'),
  };
}

/**
 * One knex pool per process. Connections time out quickly so an unreachable database turns into a
 * prompt 503 rather than a hung request; the pool reconnects on its own when the server returns. A
 * database that accepts connections but answers nothing is bounded too: by the server's own
 * timeouts where it still runs, and by the pool's guard (pool-guard.ts) where nothing comes back.
 * The server-side timeouts go as startup parameters, which a transaction pooler would refuse.
 */
export function createDb(options: DbOptions): Db {
  const t = options.timeouts ?? {};
  const connectMs = t.connectMs ?? 5000;
  const serverSide = options.pooler === 'transaction' ? {} : { statement_timeout: t.statementMs || undefined, idle_in_transaction_session_timeout: t.idleInTransactionMs || undefined };
  const guard = createPoolGuard({ queryTimeoutMs: t.queryMs ?? 0 });
  const db = knex({
    client: 'pg',
    connection: {
      connectionString: options.url,
      application_name: options.applicationName ?? 'stepwise',
      connectionTimeoutMillis: connectMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: t.keepAliveDelayMs ?? 10000,
      ...serverSide,
    },
    pool: {
      min: options.poolMin ?? 0,
      max: options.poolMax ?? 10,
      idleTimeoutMillis: 30000,
      createTimeoutMillis: connectMs,
      acquireTimeoutMillis: options.acquireTimeoutMs ?? 5000,
      propagateCreateError: true,
      afterCreate: guard.afterCreate,
    },
    acquireConnectionTimeout: options.acquireTimeoutMs ?? 5000,
    log: knexLog(options.log),
  });
  guard.install(db);
  classifyConnectionFailures(db);
  if (options.pooler === 'transaction') pooledDbs.add(db);
  return db;
}

/** Rows of a raw query, typed by the caller. */
export async function queryRows<T>(db: Knex | Knex.Transaction, sql: string, bindings: readonly unknown[] = []): Promise<T[]> {
  const result = (await db.raw(sql, bindings as Knex.RawBinding[])) as { rows: T[] };
  return result.rows;
}

interface PoolClient {
  acquireConnection(): Promise<pg.ClientBase>;
  releaseConnection(connection: pg.ClientBase): Promise<void>;
}

/**
 * Runs a hot-path statement as a named prepared statement on a connection of the knex pool: Postgres
 * parses and plans it once per connection instead of on every call. `text` uses $1..$n placeholders.
 * Only for statements outside a transaction. Behind a transaction pooler the statement is unnamed
 * (parsed and planned on every call): the pooler's server connections are not the client's.
 */
export async function preparedRows<T>(db: Knex, name: string, text: string, values: readonly unknown[]): Promise<T[]> {
  if (pooledDbs.has(db)) return withConnection(db, async (connection) => (await connection.query<T & pg.QueryResultRow>({ text, values: values as unknown[] })).rows);
  return withConnection(db, async (connection) => {
    const run = () => connection.query<T & pg.QueryResultRow>({ name, text, values: values as unknown[] });
    try {
      return (await run()).rows;
    } catch (err) {
      if (!isStalePlan(err)) throw err;
      // A migration added a column to a table the statement reads with `*`: prepare it again.
      await connection.query(`DEALLOCATE ${pg.escapeIdentifier(name)}`);
      delete (connection as unknown as { connection: { parsedStatements: Record<string, string> } }).connection.parsedStatements[name];
      return (await run()).rows;
    }
  });
}

/**
 * A parameter of a prepared statement as the planner may not read it: `(SELECT $n::type)::type`, an
 * InitPlan evaluated once per run. A prepared statement's first five runs are planned with their
 * values (4 ids cost as 4 rows), its generic plan without (10 ids, 100 unnested rows): on a table of
 * any size the generic plan can look dearer than a small batch's, and PostgreSQL then plans every run
 * anew, which for a statement of many CTEs costs more than running it. Hidden, both plans see the same
 * unknown and the generic plan is kept after the fifth run. Used where test/integration/plan-cache
 * showed the fault (a batch's arrays); the claims' LIMIT and the insert keep their generic plans as
 * they are.
 */
export const opaqueParam = (param: string, type: string): string => `(SELECT ${param}::${type})::${type}`;

/** Runs `fn` on one connection of the knex pool, for work that spans several statements on it. */
export async function withConnection<T>(db: Knex, fn: (connection: pg.ClientBase) => Promise<T>): Promise<T> {
  const client = db.client as unknown as PoolClient;
  const connection = await client.acquireConnection();
  try {
    return await fn(connection);
  } catch (err) {
    throw connectionFailure(connection, err);
  } finally {
    await client.releaseConnection(connection);
  }
}

/**
 * Runs `fn` in a READ COMMITTED transaction on one connection of the knex pool (whatever the database's
 * default isolation), committing when it returns and rolling back when it throws: for work whose
 * later statements must see what committed while an earlier one waited for a lock.
 */
export async function withReadCommitted<T>(db: Knex, fn: (connection: pg.ClientBase) => Promise<T>): Promise<T> {
  return withConnection(db, async (connection) => {
    await connection.query('BEGIN ISOLATION LEVEL READ COMMITTED');
    try {
      const result = await fn(connection);
      await connection.query('COMMIT');
      return result;
    } catch (err) {
      await connection.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  });
}

/** Most rows an Execute may return; more would suspend the portal (never reached by our statements). */
const ALL_ROWS = 2 ** 31 - 1;

/**
 * A prepared statement run in the extended protocol's implicit transaction, with its rows asked for
 * apart from the commit: Execute is followed by Flush rather than Sync, so PostgreSQL sends the rows
 * as soon as the statement has run, and Sync (sent when they arrive) commits. pg does exactly this for
 * a query with `rows` set (it pages cursors so); this class only reports the rows on CommandComplete,
 * and sends the Sync an error before it would otherwise never get (the connection would hang).
 * Without a callback pg keeps no rows of its own (the 'row' listener collects them) and reports the
 * end and errors as events.
 */
class EarlyRowsQuery extends pg.Query {
  /** The rows, once the statement has run; rejects when it failed. */
  readonly executed: Promise<unknown[]>;
  /** Settles when the commit is acknowledged; rejects when the statement or the commit failed. */
  readonly committed: Promise<void>;
  private synced = false;
  private onExecuted!: () => void;

  constructor(config: pg.QueryConfig) {
    super({ ...config, rows: ALL_ROWS } as pg.QueryConfig);
    const rows: unknown[] = [];
    this.on('row', (row) => rows.push(row));
    this.executed = new Promise((resolve, reject) => {
      this.onExecuted = () => resolve(rows);
      this.once('error', reject);
    });
    this.committed = new Promise((resolve, reject) => {
      this.once('end', () => resolve());
      this.once('error', reject);
    });
  }

  // pg's hooks for a submitted query (not in its type declarations).
  handleCommandComplete(msg: unknown, connection: { sync(): void }): void {
    (pg.Query.prototype as unknown as { handleCommandComplete(m: unknown, c: unknown): void }).handleCommandComplete.call(this, msg, connection);
    this.synced = true; // pg's handler has sent the Sync: the commit is under way
    this.onExecuted();
  }

  handleError(err: Error, connection: { sync(): void }): void {
    if (!this.synced) {
      this.synced = true;
      connection.sync();
    }
    (pg.Query.prototype as unknown as { handleError(e: Error, c: unknown): void }).handleError.call(this, err, connection);
  }
}

/**
 * Runs a prepared statement in a transaction of its own and returns its rows as soon as the statement
 * has run, before its commit is acknowledged; `commit` settles when it is. The rows it wrote stay
 * locked until then, so any other writer of them waits for the outcome. One round trip for the rows,
 * the commit answered on the same connection after it (see EarlyRowsQuery). For work that may begin
 * on rows that are not durably its own yet, as long as nothing it writes can land unless the commit did.
 * Unnamed behind a transaction pooler (see preparedRows): the implicit transaction, open until the
 * Sync, keeps the pooler's server connection for both halves.
 */
export async function preparedRowsBeforeCommit<T>(db: Knex, name: string, text: string, values: readonly unknown[]): Promise<{ rows: T[]; commit: Promise<void> }> {
  const client = db.client as unknown as PoolClient;
  const connection = await client.acquireConnection();
  const query = new EarlyRowsQuery({ name: pooledDbs.has(db) ? undefined : name, text, values: values as unknown[] });
  connection.query(query as unknown as pg.QueryConfig);
  // The connection goes back to the pool once the commit is answered, either way.
  const commit = query.committed.finally(() => client.releaseConnection(connection));
  try {
    return { rows: (await query.executed) as T[], commit: commit.catch((err: unknown) => Promise.reject(connectionFailure(connection, err))) };
  } catch (err) {
    await commit.catch(() => undefined);
    throw connectionFailure(connection, err);
  }
}

/**
 * A simple-protocol query of several statements that reports the rows of some of them (`indexes`,
 * counted from 0) as soon as the last of those has run: PostgreSQL sends each statement's results as
 * it completes, so the rows arrive before a COMMIT later in the same query is answered. Like
 * EarlyRowsQuery, for work that may begin on rows that are not durably its own yet.
 */
class EarlyStatementQuery extends pg.Query {
  /** The rows of each statement in `indexes`, in that order, once the last has run. */
  readonly executed: Promise<unknown[][]>;
  /** Settles when the whole query is answered; rejects when any statement failed. */
  readonly finished: Promise<void>;
  /** Not `rows`: pg.Query reads that as a row count, which would switch it to the extended protocol. */
  private readonly collected: unknown[][];
  private completedStatements = 0;
  private onExecuted!: (rows: unknown[][]) => void;

  constructor(
    text: string,
    private readonly indexes: readonly number[],
  ) {
    super({ text } as pg.QueryConfig);
    this.collected = indexes.map(() => []);
    this.on('row', (row) => {
      const at = this.indexes.indexOf(this.completedStatements);
      if (at >= 0) this.collected[at].push(row);
    });
    this.executed = new Promise((resolve, reject) => {
      this.onExecuted = resolve;
      this.once('error', reject);
    });
    this.finished = new Promise((resolve, reject) => {
      this.once('end', () => resolve());
      this.once('error', reject);
    });
  }

  // pg's hook for each statement's end (not in its type declarations).
  handleCommandComplete(msg: unknown, connection: unknown): void {
    (pg.Query.prototype as unknown as { handleCommandComplete(m: unknown, c: unknown): void }).handleCommandComplete.call(this, msg, connection);
    if (this.completedStatements === Math.max(...this.indexes)) this.onExecuted(this.collected);
    this.completedStatements += 1;
  }
}

/**
 * Runs statements ending in COMMIT, written by `build` for the connection they will run on, in the
 * simple protocol, and returns the rows of the statements at `indexes` as soon as the last of them
 * has run; `finished` settles when the rest (the commit) is answered. A failure anywhere rolls the
 * transaction back before the connection goes back to the pool; `onFailure` runs on that connection
 * first (to learn what the failure left behind).
 */
export async function simpleRowsBeforeCommit(
  db: Knex,
  build: (connection: pg.ClientBase) => { statements: string[]; indexes: number[] },
  onFailure?: (connection: pg.ClientBase) => Promise<void>,
): Promise<{ rows: unknown[][]; finished: Promise<void> }> {
  const client = db.client as unknown as PoolClient;
  const connection = await client.acquireConnection();
  const { statements, indexes } = build(connection);
  const query = new EarlyStatementQuery(statements.join(';\n'), indexes);
  connection.query(query as unknown as pg.QueryConfig);
  const finished = query.finished.then(
    () => client.releaseConnection(connection),
    async (err: unknown) => {
      await connection.query('ROLLBACK').catch(() => undefined);
      await onFailure?.(connection).catch(() => undefined);
      await client.releaseConnection(connection);
      throw connectionFailure(connection, err);
    },
  );
  try {
    return { rows: await query.executed, finished: finished.then(() => undefined) };
  } catch (err) {
    await finished.catch(() => undefined);
    throw connectionFailure(connection, err);
  }
}

/** True when the database answers a trivial query. */
export async function pingDb(db: Knex): Promise<boolean> {
  try {
    await db.raw('SELECT 1');
    return true;
  } catch {
    return false;
  }
}

/**
 * A connection, pool or transaction of the caller's: node-postgres's (Client, PoolClient, Pool) or
 * knex's (an instance or a transaction). Statements run on it take part in its transaction.
 */
export type Queryable = { query(config: { name?: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }> } | Knex;

function isKnex(q: Queryable): q is Knex {
  return typeof (q as Knex).raw === 'function' && typeof (q as Knex).client === 'object';
}

/**
 * Runs `fn` with statements on the caller's connection or transaction (see Queryable), so that what
 * it writes commits with the caller's own writes, or not at all. Statements are unnamed, and go
 * straight to knex's pg connection (a transaction's own, or one from its pool), so that the instance's
 * postProcessResponse or wrapIdentifier hooks never see their results.
 */
export async function onCallerConnection<T>(q: Queryable, fn: (run: Runner) => Promise<T>): Promise<T> {
  if (!isKnex(q)) return fn(unnamedOn(q));
  const client = q.client as unknown as { acquireConnection(): Promise<pg.ClientBase>; releaseConnection(c: pg.ClientBase): Promise<void> };
  const connection = await client.acquireConnection();
  try {
    return await fn(unnamedOn(connection));
  } finally {
    await client.releaseConnection(connection);
  }
}

/**
 * Unnamed statements on the caller's connections: a named one would be prepared on every connection
 * it meets, which poolers in transaction mode (PgBouncer, RDS Proxy, Supavisor) refuse or pin.
 */
function unnamedOn(q: { query(config: { text: string; values: unknown[] }): Promise<{ rows: unknown[] }> }): Runner {
  const run = async <T>(_name: string, text: string, values: readonly unknown[]) => (await q.query({ text, values: values as unknown[] })).rows as T[];
  return Object.assign(run, { unprepared: true });
}

/**
 * Runs one statement (as a named prepared statement, on Stepwise's own pool) and returns its rows.
 * `unprepared`: every statement is parsed and planned anew, so one row takes ONE_ROW_SQL instead.
 */
export type Runner = (<T>(name: string, text: string, values: readonly unknown[]) => Promise<T[]>) & { unprepared?: boolean };

/** A Runner over Stepwise's own pool: each statement prepared by name, unless behind a transaction pooler (see preparedRows). */
export const poolRunner = (db: Knex): Runner => {
  const run: Runner = (name, text, values) => preparedRows(db, name, text, values);
  return pooledDbs.has(db) ? Object.assign(run, { unprepared: true }) : run;
};
