// `make fuzz`: 10,000+ generated bad requests across every operation of openapi.yaml against a real
// server and database. Fails on the first 5xx, missing envelope, or answer the spec does not list.
//   make fuzz ARGS="--runs 20000 --seed 7"
// Uses DATABASE_URL when set (a scratch database is created and dropped on it), else embedded PostgreSQL.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { startApiServer } from '../src/api/server';
import { getSpec } from '../src/api/spec';
import { createStepwiseClient } from '../src/client';
import { loadConfig } from '../src/config';
import { createLogger } from '../src/logger';
import { startEmbeddedPostgres } from '../src/store/embedded';
import { createTestDatabase } from '../test/helpers/db';
import { checkFuzzResponse, fuzzRequests, sendFuzzRequest } from '../test/helpers/fuzz-requests';
import { createExecutionIn, registerTask } from '../test/helpers/simulated-worker';

function argument(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const value = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} must be a non-negative integer`);
  return value;
}

async function main(): Promise<void> {
  const runs = argument('runs', 10000);
  const seed = argument('seed', Date.now() % 1_000_000);
  let stopEmbedded: (() => Promise<void>) | undefined;
  let dataDir: string | undefined;
  if (!process.env.DATABASE_URL) {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-fuzz-'));
    const pg = await startEmbeddedPostgres({ dataDir: path.join(dataDir, 'pg') });
    process.env.STEPWISE_TEST_ADMIN_URL = pg.url;
    stopEmbedded = pg.stop;
  }
  const t = await createTestDatabase();
  const token = 'fuzz-token';
  const config = loadConfig({ env: {}, overrides: { port: 0, 'auth.tokens': [token] } });
  const api = await startApiServer({ config, databaseUrl: t.url, db: t.db, log: createLogger({ level: 'silent' }) });
  try {
    const client = createStepwiseClient({ baseUrl: api.url, token });
    await registerTask(t.db, 'approve-order', { type: 'object', properties: { orderId: { type: 'string' } }, required: ['orderId'] }, {
      approval: { type: 'object', properties: { approved: { type: 'boolean' } }, required: ['approved'] },
    });
    const knownIds: string[] = [];
    for (const state of ['pending', 'running', 'waiting', 'completed', 'failed', 'cancelled'] as const) {
      knownIds.push((await createExecutionIn(client, t.db, state)).id);
    }
    const statuses = new Map<string, number>();
    let sent = 0;
    console.log(`fuzzing ${api.url} with ${runs} requests, seed ${seed}`);
    await fc.assert(
      fc.asyncProperty(fuzzRequests({ spec: getSpec(), knownIds, token }), async (req) => {
        const res = await sendFuzzRequest(api.url, req, 200);
        sent++;
        if (sent % 1000 === 0) console.log(`  ${sent} requests`);
        if (!res) return;
        const key = `${req.operationId} ${res.status}`;
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
        const problems = checkFuzzResponse(req, res);
        if (problems.length > 0) throw new Error(`${req.method} ${req.path.slice(0, 300)} → ${res.status}: ${problems.join('; ')}`);
      }),
      { seed, numRuns: runs, endOnFailure: true },
    );
    console.log(`no problems in ${sent} requests (seed ${seed}). Answers by operation and status:`);
    for (const [key, n] of [...statuses].sort()) console.log(`  ${key.padEnd(32)} ${n}`);
  } finally {
    await api.close();
    await t.drop();
    if (stopEmbedded) await stopEmbedded();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
