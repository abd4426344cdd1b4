import type { Socket } from 'node:net';
import type { Knex } from 'knex';
import { DatabaseUnavailableError, PoolSaturatedError, markSilent } from './db-errors';

/**
 * What a pool has heard from its database lately, in the order things happened: whether the last
 * word was an answer (bytes from a connection) or a failure (a connection that could not be made,
 * or that went silent). A full pool whose database still answers is saturated; one whose database
 * stopped answering is not busy but unavailable.
 */
class PoolHealth {
  private seq = 0;
  private lastAnswer = 0;
  private lastFailure = 0;

  answered(): void {
    this.lastAnswer = ++this.seq;
  }

  failed(): void {
    this.lastFailure = ++this.seq;
  }

  get isAnswering(): boolean {
    return this.lastAnswer > this.lastFailure;
  }
}

interface Watch {
  socket: Socket;
  checkedOut: boolean;
}

interface PoolInternals {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<void>;
  pool?: { numUsed(): number; max: number };
}

/** Connections each guarded pool closed because the database went silent under a statement. */
const silentClosures = new WeakMap<object, { count: number }>();

/** What a pool holds right now, and how many connections its guard closed for silence since it was made. */
export interface DbPoolStats {
  used: number;
  free: number;
  /** Statements waiting for a connection. */
  waiting: number;
  silentClosures: number;
}

/** The stats of `db`'s pool (see DbPoolStats); undefined once it is destroyed. */
export function dbPoolStats(db: Knex): DbPoolStats | undefined {
  const pool = (db.client as { pool?: { numUsed(): number; numFree(): number; numPendingAcquires(): number } }).pool;
  if (!pool) return undefined;
  return { used: pool.numUsed(), free: pool.numFree(), waiting: pool.numPendingAcquires(), silentClosures: silentClosures.get(db)?.count ?? 0 };
}

/** The socket under a pg client (a TLS socket when the connection is encrypted). */
function socketOf(connection: unknown): Socket | undefined {
  return (connection as { connection?: { stream?: Socket } }).connection?.stream;
}

export interface PoolGuardOptions {
  /** How long a checked-out connection may hear nothing from the database before it is closed (0: never). */
  queryTimeoutMs: number;
}

/** The pool's afterCreate hook and the wrappers of its acquire and release, made together (see createPoolGuard). */
export interface PoolGuard {
  /** knex's `pool.afterCreate`: watches each new connection's socket. */
  afterCreate(connection: unknown, done: (err: Error | null, connection: unknown) => void): void;
  /** Wraps the pool's acquire and release, once the knex instance exists. */
  install(db: Knex): void;
}

/**
 * Bounds every statement on a pool. A checked-out connection whose database sends nothing for
 * queryTimeoutMs (a hung server or proxy: TCP keep-alive cannot see it) has its socket destroyed, so
 * the statement fails as unavailable and PostgreSQL, seeing the session gone, rolls back what it had
 * begun. A connection not had in time is PoolSaturatedError when every one is in use and the
 * database's last word was an answer, else DatabaseUnavailableError. Idle pool connections are not watched.
 */
export function createPoolGuard(options: PoolGuardOptions): PoolGuard {
  const health = new PoolHealth();
  const watches = new WeakMap<object, Watch>();
  const closures = { count: 0 };
  return {
    afterCreate(connection, done) {
      health.answered();
      const socket = socketOf(connection);
      if (socket && options.queryTimeoutMs > 0) {
        const watch: Watch = { socket, checkedOut: false };
        watches.set(connection as object, watch);
        socket.on('timeout', () => {
          if (!watch.checkedOut) return;
          markSilent(connection, options.queryTimeoutMs);
          health.failed();
          closures.count += 1;
          socket.destroy();
        });
      }
      socket?.on('data', () => health.answered());
      done(null, connection);
    },
    install(db) {
      silentClosures.set(db, closures);
      const client = db.client as unknown as PoolInternals;
      const acquire = client.acquireConnection.bind(client);
      const release = client.releaseConnection.bind(client);
      client.acquireConnection = async () => {
        let connection: unknown;
        try {
          connection = await acquire();
        } catch (err) {
          const pool = client.pool;
          const timedOut = err !== null && typeof err === 'object' && (err as { name?: unknown }).name === 'KnexTimeoutError';
          if (timedOut && pool && pool.numUsed() >= pool.max && health.isAnswering) throw new PoolSaturatedError(err, pool.max);
          health.failed();
          throw err instanceof DatabaseUnavailableError ? err : new DatabaseUnavailableError(err);
        }
        const watch = watches.get(connection as object);
        if (watch) {
          watch.checkedOut = true;
          watch.socket.setTimeout(options.queryTimeoutMs);
        }
        return connection;
      };
      client.releaseConnection = (connection) => {
        const watch = watches.get(connection as object);
        if (watch) {
          watch.checkedOut = false;
          watch.socket.setTimeout(0);
        }
        return release(connection);
      };
    },
  };
}
