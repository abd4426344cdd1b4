import { createLogger } from '../../src/logger';
import { Worker, type WorkerOptions } from '../../src/engine/worker';
import type { TaskDefinition } from '../../src/engine/task';
import type { TestDatabase } from './db';

export const quietLog = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent', pretty: false });

/** Starts a real worker on the test database; stop it with `await worker.stop()`. */
export async function startWorker(t: TestDatabase, tasks: TaskDefinition[], options: Partial<WorkerOptions> = {}): Promise<Worker> {
  const worker = new Worker({
    db: t.db,
    databaseUrl: t.url,
    tasks,
    log: quietLog,
    concurrency: 8,
    leaseMs: 5000,
    pollIntervalMs: 200,
    shutdownGraceMs: 2000,
    ...options,
  });
  await worker.start();
  return worker;
}
