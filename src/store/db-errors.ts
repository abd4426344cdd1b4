import type { Knex } from 'knex';

/**
 * The one vocabulary for what PostgreSQL and the driver throw, decided here and nowhere else: by
 * SQLSTATE, by the socket's error code, and by the phase the error came from, never by message text.
 *
 * - `unavailable`: no working connection could be had or kept (refused or reset sockets, timeouts, a
 *   server starting up or shutting down, a database that refuses connections, too many connections,
 *   failed authentication, a pool that gave none in time, a connection that went silent), or the
 *   server cancelled a statement that outran statement_timeout. The API answers 503; workers wait it out.
 * - `conflict`: the statement lost a deadlock or a serialization check and was rolled back whole;
 *   running it again is PostgreSQL's documented remedy.
 * - `stale_plan`: a prepared statement's result columns changed under it (a migration); prepare again.
 */
export type DbErrorKind = 'unavailable' | 'conflict' | 'stale_plan';

/** Thrown in place of any error met while getting a connection, or that left the connection dead. */
export class DatabaseUnavailableError extends Error {
  /** The SQLSTATE or socket error code of the cause, when it had one (for logs). */
  readonly code: string | undefined;

  constructor(override readonly cause: unknown) {
    super(`the database is unavailable: ${cause instanceof Error ? cause.message : String(cause)}`.slice(0, 500));
    this.name = 'DatabaseUnavailableError';
    this.code = codeOf(cause);
  }
}

/**
 * No connection could be had because every one of the pool's is in use while the database answers:
 * the process is busy, not the database away. Still `unavailable` to every caller that waits an
 * outage out; the API tells it apart (503 with reason `pool_saturated`).
 */
export class PoolSaturatedError extends DatabaseUnavailableError {
  constructor(
    cause: unknown,
    readonly poolMax: number,
  ) {
    super(cause);
    this.name = 'PoolSaturatedError';
    this.message = `every one of the pool's ${poolMax} database connections is in use`;
  }
}

/** True when no connection could be had because the pool is saturated (see PoolSaturatedError). */
export function isPoolSaturated(err: unknown): boolean {
  return err instanceof PoolSaturatedError;
}

/** Connections closed because the database sent nothing for this many ms while a statement waited. */
const silentConnections = new WeakMap<object, number>();

/** Marks `connection` as given up for silence, so the statements it fails say why (see pool-guard.ts). */
export function markSilent(connection: unknown, ms: number): void {
  if (connection && typeof connection === 'object') silentConnections.set(connection, ms);
}

/** Socket and name-resolution failures Node reports on the connection. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN']);

/**
 * SQLSTATEs that mean the server will not go on serving a connection, wherever they arrive; the whole
 * class 08 (connection exception) is matched by prefix beside these. Codes that only a connection
 * attempt meets (55000 when ALLOW_CONNECTIONS is false, 3D000, 28000/28P01, 53300) are not listed:
 * classifyConnectionFailures makes every failure to connect unavailable, while the same code raised
 * by a statement is that statement's own error.
 */
const UNAVAILABLE_STATES = new Set([
  '57P01', // admin_shutdown: the backend was terminated or the server is shutting down
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: starting up, shutting down, in recovery
  '57P05', // idle_session_timeout
  '57014', // query_canceled: statement_timeout (or an administrator) cancelled the statement; it rolled back
  '25P03', // idle_in_transaction_session_timeout ended the session
]);

function codeOf(err: unknown): string | undefined {
  const code = err && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? code : undefined;
}

/** What kind of database failure `err` is, or undefined for anything else (a bug, a constraint). */
export function classifyDbError(err: unknown): DbErrorKind | undefined {
  if (err instanceof DatabaseUnavailableError) return 'unavailable';
  if (err && typeof err === 'object' && (err as { name?: unknown }).name === 'KnexTimeoutError') return 'unavailable';
  const code = codeOf(err);
  if (code === undefined) return undefined;
  if (code === '40P01' || code === '40001') return 'conflict';
  // feature_not_supported, raised by the plan cache's revalidation: the statement's result changed.
  if (code === '0A000' && (err as { routine?: unknown }).routine === 'RevalidateCachedQuery') return 'stale_plan';
  if (code.startsWith('08') || UNAVAILABLE_STATES.has(code) || SOCKET_CODES.has(code)) return 'unavailable';
  return undefined;
}

/** True when `err` says the database cannot be reached right now (as opposed to a bug or bad SQL). */
export function isDatabaseUnavailable(err: unknown): boolean {
  return classifyDbError(err) === 'unavailable';
}

/** True for a deadlock or serialization failure: the statement was rolled back whole; run it again. */
export function isTransientConflict(err: unknown): boolean {
  return classifyDbError(err) === 'conflict';
}

/** True when a prepared statement must be prepared again because a migration changed its result. */
export function isStalePlan(err: unknown): boolean {
  return classifyDbError(err) === 'stale_plan';
}

/** knex marks a pg connection that emitted 'error' or 'end' (its socket died) with this property. */
interface PgConnection {
  __knex__disposed?: unknown;
}

/**
 * The error a statement on `connection` should throw: when the connection died under it (pg then
 * rejects with a bare Error, no SQLSTATE), the database is unavailable; otherwise `err` itself.
 */
export function connectionFailure(connection: unknown, err: unknown): unknown {
  if (err instanceof DatabaseUnavailableError) return err;
  const silentMs = connection && typeof connection === 'object' ? silentConnections.get(connection) : undefined;
  if (silentMs !== undefined) return new DatabaseUnavailableError(new SilentDatabaseError(silentMs));
  if ((connection as PgConnection | undefined)?.__knex__disposed && classifyDbError(err) === undefined) return new DatabaseUnavailableError(err);
  return err;
}

/** Why a connection was given up: the database sent nothing while a statement waited. */
class SilentDatabaseError extends Error {
  override name = 'SilentDatabaseError';
  readonly code = 'ETIMEDOUT';

  constructor(ms: number) {
    super(`the database sent nothing for ${ms} ms while a statement waited; the connection was closed`);
  }
}

interface KnexClientInternals {
  _query(connection: unknown, obj: unknown): Promise<unknown>;
}

/**
 * Makes every statement whose connection died under it a DatabaseUnavailableError (a failure to
 * obtain a connection is made one by the pool's guard, pool-guard.ts, whatever its SQLSTATE: an
 * authentication or catalog error at connect time is the database being unavailable, while the same
 * code from a statement would not be). Applied once, where the pool is made.
 */
export function classifyConnectionFailures(db: Knex): void {
  const client = db.client as unknown as KnexClientInternals;
  const query = client._query.bind(client);
  client._query = async (connection, obj) => {
    try {
      return await query(connection, obj);
    } catch (err) {
      throw connectionFailure(connection, err);
    }
  };
}
