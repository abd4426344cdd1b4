import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig } from '../../src/config';
import { createDb, dbOptionsOf, type Db } from '../../src/store/db';
import { migrateLatest } from '../../src/store/migrate';

/** A fresh, migrated database of its own for one test file. */
export interface TestDatabase {
  url: string;
  db: Db;
  /** Closes the pool and drops the database. */
  drop(): Promise<void>;
}

function adminUrl(): string {
  const url = process.env.STEPWISE_TEST_ADMIN_URL ?? process.env.DATABASE_URL;
  if (!url) throw new Error('no test database: global setup did not run');
  return url;
}

/** Runs `fn` with a short-lived client on the admin database. */
export async function withAdminClient<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function createTestDatabase(options: { poolMax?: number } = {}): Promise<TestDatabase> {
  const name = `sw_test_${randomBytes(6).toString('hex')}`;
  await withAdminClient((c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  // The production defaults of every timeout, so the suite runs within them.
  const db = createDb({ ...dbOptionsOf(loadConfig({ env: {} }), url.toString()), poolMax: options.poolMax ?? 10 });
  await migrateLatest(db);
  return {
    url: url.toString(),
    db,
    async drop() {
      await db.destroy();
      await withAdminClient((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}
