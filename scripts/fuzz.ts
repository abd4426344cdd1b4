// `make fuzz`: 10,000+ generated bad (and some good) requests across every operation of openapi.yaml
// against a real API server (HTTP on loopback, PostgreSQL embedded unless DATABASE_URL is set): wrong
// types, missing and extra fields, junk and oversized ids, huge numbers, unicode, deeply nested JSON,
// oversized bodies, wrong content types, bad tokens. Passes when no answer is a 5xx, every error answer
// is the envelope and every answer is one the spec lists for that operation. Writes the report to
// chaos-results/fuzz-<time>.json.
//
//   make fuzz                          10,000 requests
//   make fuzz ARGS="--requests 2000 --seed 7"
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import fc from 'fast-check';
import { startApiServer } from '../src/api/server';
import { getSpec } from '../src/api/spec';
import { createStepwiseClient } from '../src/client';
import { loadConfig } from '../src/config';
import { createLogger } from '../src/logger';
import { createDb } from '../src/store/db';
import { startEmbeddedPostgres } from '../src/store/embedded';
import { migrateLatest } from '../src/store/migrate';
import { checkFuzzResponse, fuzzRequests, sendFuzzRequest, type FuzzRequest } from '../test/helpers/fuzz-requests';
import { createExecutionIn, registerTask } from '../test/helpers/simulated-worker';
import { createDatabase, dropDatabase, ROOT } from './chaos/processes';

const TOKEN = 'fuzz-token';

async function main(): Promise<void> {
  const opts = new Command('fuzz')
    .option('--requests <n>', 'requests to send', '10000')
    .option('--seed <n>', 'seed (default: time)')
    .option('--concurrency <n>', 'requests in flight', '16')
    .parse()
    .opts<{ requests: string; seed?: string; concurrency: string }>();
  const total = Number(opts.requests);
  const seed = Number(opts.seed ?? Date.now() % 1_000_000);
  const started = Date.now();

  let dir: string | undefined;
  let stopPg = async () => undefined as void;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    dir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-fuzz-'));
    chmodSync(dir, 0o755);
    const pg = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pgdata'), database: 'postgres' });
    adminUrl = pg.url;
    stopPg = pg.stop;
  }
  const dbName = `stepwise_fuzz_${Date.now().toString(36)}`;
  const url = await createDatabase(adminUrl, dbName);
  const db = createDb({ url });
  await migrateLatest(db);
  const config = loadConfig({ env: {}, overrides: { port: 0, 'auth.tokens': [TOKEN], logLevel: 'warn' } });
  const api = await startApiServer({ config, databaseUrl: url, db, log: createLogger({ level: 'error', pretty: false }) });
  try {
    // The spec's example task, so that valid samples get past task_not_registered, and executions in every state.
    await registerTask(db, 'approve-order', { type: 'object', properties: { orderId: { type: 'string' } }, required: ['orderId'] }, {
      approval: { type: 'object', properties: { approved: { type: 'boolean' } }, required: ['approved'] },
    });
    const client = createStepwiseClient({ baseUrl: api.url, token: TOKEN });
    const knownIds: string[] = [];
    for (const state of ['pending', 'running', 'waiting', 'waiting', 'completed', 'failed', 'cancelled'] as const) {
      knownIds.push((await createExecutionIn(client, db, state)).id);
    }
    const spec = getSpec();
    const requests = fc.sample(fuzzRequests({ spec, knownIds, token: TOKEN }), { numRuns: total, seed });

    const byOperation = new Map<string, Map<number, number>>();
    const problems: Array<{ request: FuzzRequest; status?: number; problems: string[] }> = [];
    let serverErrors = 0;
    let errorAnswers = 0;
    let enveloped = 0;
    let openLongPolls = 0;
    let next = 0;
    const lane = async () => {
      while (next < requests.length) {
        const req = requests[next++];
        let res;
        try {
          res = await sendFuzzRequest(api.url, req, 300);
        } catch (err) {
          problems.push({ request: req, problems: [`no answer: ${(err as Error).message}`] });
          continue;
        }
        if (!res) {
          openLongPolls += 1; // a valid long-poll still waiting: nothing wrong
          continue;
        }
        const statuses = byOperation.get(req.operationId) ?? new Map<number, number>();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        byOperation.set(req.operationId, statuses);
        if (res.status >= 500) serverErrors += 1;
        if (res.status >= 400) {
          errorAnswers += 1;
          if (typeof (res.body as { error?: { code?: unknown } } | undefined)?.error?.code === 'string') enveloped += 1;
        }
        const found = checkFuzzResponse(req, res);
        if (found.length > 0) problems.push({ request: { ...req, body: req.body?.slice(0, 300), encoded: req.encoded && { encoding: req.encoded.encoding, bytes: req.encoded.bytes.subarray(0, 64) } }, status: res.status, problems: found });
      }
    };
    await Promise.all(Array.from({ length: Number(opts.concurrency) }, lane));

    const missingOps = [...spec.operations.keys()].filter((op) => !byOperation.has(op));
    const report = {
      seed,
      requests: total,
      durationMs: Date.now() - started,
      answered: total - openLongPolls,
      openLongPollsAbandoned: openLongPolls,
      serverErrors,
      errorAnswers,
      envelopePercent: errorAnswers === 0 ? 100 : Math.round((enveloped / errorAnswers) * 10000) / 100,
      offSpec: problems.length,
      operationsNotReached: missingOps,
      statusesByOperation: Object.fromEntries([...byOperation].sort().map(([op, s]) => [op, Object.fromEntries([...s].sort((a, b) => a[0] - b[0]))])),
      problems: problems.slice(0, 50),
    };
    const ok = serverErrors === 0 && problems.length === 0 && enveloped === errorAnswers && missingOps.length === 0;
    mkdirSync(path.join(ROOT, 'chaos-results'), { recursive: true });
    const file = path.join(ROOT, 'chaos-results', `fuzz-${Date.now().toString(36)}.json`);
    writeFileSync(file, `${JSON.stringify({ ...report, ok }, null, 2)}\n`);

    const line = (k: string, v: unknown) => process.stdout.write(`  ${k.padEnd(30)} ${String(v)}\n`);
    process.stdout.write('\nFuzz report\n');
    line('requests (seed)', `${total} (${seed}) in ${(report.durationMs / 1000).toFixed(1)} s`);
    line('operations reached', `${byOperation.size}/${spec.operations.size}`);
    line('answers with a 5xx', serverErrors);
    line('error answers in the envelope', `${enveloped}/${errorAnswers} (${report.envelopePercent} %)`);
    line('answers not in the spec', problems.length);
    line('valid long-polls left open', openLongPolls);
    for (const [op, statuses] of Object.entries(report.statusesByOperation)) line(`  ${op}`, Object.entries(statuses).map(([s, n]) => `${s}×${n}`).join(' '));
    for (const p of problems.slice(0, 10)) process.stdout.write(`    ${p.request.method} ${p.request.path.slice(0, 120)} → ${p.status}: ${p.problems.join('; ').slice(0, 300)}\n`);
    process.stdout.write(`  ${ok ? 'PASS' : 'FAIL'}; report: ${path.relative(process.cwd(), file)}\n`);
    process.exitCode = ok ? 0 : 1;
  } finally {
    await api.close();
    await db.destroy();
    await dropDatabase(adminUrl, dbName).catch(() => undefined);
    await stopPg();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`fuzz: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
