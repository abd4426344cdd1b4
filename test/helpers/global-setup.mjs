// Starts one embedded PostgreSQL for the whole run unless DATABASE_URL points at a server already.
// Each test file then creates its own database on it (test/helpers/db.ts), so files run in parallel.
// The server is started by src/store/embedded.ts, as for `stepwise dev` (loaded through tsx: jest's
// loader cannot import TypeScript here), so that the suite runs wherever `dev` does: as root in a
// clone under a mode-700 folder too, where the server's `postgres` user cannot reach node_modules.
import { chmodSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { tsImport } from 'tsx/esm/api';

export default async function globalSetup() {
  if (process.env.DATABASE_URL) {
    process.env.STEPWISE_TEST_ADMIN_URL = process.env.DATABASE_URL;
    return;
  }
  const { startEmbeddedPostgres } = await tsImport('../../src/store/embedded.ts', import.meta.url);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-test-'));
  chmodSync(dir, 0o755);
  const pg = await startEmbeddedPostgres({
    dataDir: path.join(dir, 'pgdata'),
    database: 'postgres',
    maxConnections: 400,
    onNotice: (message) => console.error(`embedded PostgreSQL: ${message}`),
  });
  process.env.STEPWISE_TEST_ADMIN_URL = pg.adminUrl;
  process.env.STEPWISE_TEST_PG_DIR = dir;
  process.env.STEPWISE_TEST_PG_DATA = pg.dataDir;
  globalThis.__stepwiseEmbedded = pg;
}
