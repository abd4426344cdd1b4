// The `cost` extra: what PostgreSQL spends per execution (server CPU, WAL bytes, rows written), for a
// no-op execution and for one of three steps, each drained by one in-process worker from a backlog
// inserted in batches, on a fresh database. The figures size a database (docs/deployment.md).
import { createLogger } from '../../src/logger';
import { createDb } from '../../src/store/db';
import { insertExecutions } from '../../src/store/executions';
import { upsertTasks } from '../../src/store/tasks';
import { queryRows } from '../../src/store/db';
import { TaskRegistry } from '../../src/engine/registry';
import { Worker } from '../../src/engine/worker';
import { defineTask, type TaskDefinition } from '../../src/engine/task';
import type { ExtraResult } from './extra-result';
import { pgCostBetween, pgSnapshot, type PgCost } from './pg-cost';

const log = createLogger({ level: 'warn', pretty: false });

const KINDS: Record<string, TaskDefinition> = {
  'no-op': defineTask({ name: 'cost-noop', run: async () => null }) as TaskDefinition,
  '3 steps': defineTask({
    name: 'cost-steps',
    async run(ctx) {
      await ctx.step('one', () => 1);
      await ctx.step('two', () => 2);
      return ctx.step('three', () => 3);
    },
  }) as TaskDefinition,
};

/** Inserts `n` executions of `task`, drains them with one worker (concurrency 32), and returns what PostgreSQL spent. */
async function drainCost(url: string, task: TaskDefinition, n: number): Promise<PgCost & { seconds: number }> {
  const setup = createDb({ url, poolMax: 2 });
  await upsertTasks(setup, new TaskRegistry([task]).toRegistrations());
  await setup.destroy();
  const before = await pgSnapshot(url);
  const started = Date.now();
  const inserts = createDb({ url, poolMax: 4 });
  for (let i = 0; i < n; i += 1000) await insertExecutions(inserts, Array.from({ length: Math.min(1000, n - i) }, () => ({ task: task.name, data: null })));
  await inserts.destroy();
  const db = createDb({ url, poolMax: 10 });
  const worker = new Worker({ db, databaseUrl: url, tasks: [task], log, concurrency: 32 });
  await worker.start();
  for (;;) {
    const [row] = await queryRows<{ n: number }>(db, "SELECT count(*)::int AS n FROM stepwise.executions WHERE task = ? AND status = 'completed'", [task.name]);
    if (row.n >= n) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const seconds = (Date.now() - started) / 1000;
  await worker.stop();
  // Backends report their row counts when they exit: close every pool before the second snapshot.
  await db.destroy();
  const after = await pgSnapshot(url);
  return { ...(await pgCostBetween(url, before, after)), seconds };
}

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

/** The cost per execution of each kind, `n` executions each, on its own fresh database. */
export async function costPerExecution(
  env: NodeJS.ProcessEnv,
  fresh: (env: NodeJS.ProcessEnv) => Promise<{ url: string; drop(): Promise<void> }>,
  n = 10_000,
): Promise<ExtraResult> {
  const table = [['execution', 'PostgreSQL CPU per execution', 'WAL per execution', 'rows written per execution', 'drain']];
  const values: Record<string, number | string> = {};
  for (const [kind, task] of Object.entries(KINDS)) {
    const t = await fresh(env);
    try {
      const c = await drainCost(t.url, task, n);
      const cpu = c.cpuMs === null ? null : round(c.cpuMs / n, 3);
      table.push([kind, cpu === null ? 'not readable' : `${cpu} ms`, `${Math.round(c.walBytes / n).toLocaleString('en-US')} B`, `${round(c.rowsWritten / n, 1)}`, `${round(n / c.seconds, 0).toLocaleString('en-US')}/s`]);
      const key = kind === 'no-op' ? 'noop' : 'steps3';
      values[`${key}_cpu_ms`] = cpu ?? 'n/a';
      values[`${key}_wal_bytes`] = Math.round(c.walBytes / n);
      values[`${key}_rows_written`] = round(c.rowsWritten / n, 1);
    } finally {
      await t.drop();
    }
  }
  return {
    label: 'cost per execution',
    summary: `no-op ${values.noop_cpu_ms} ms CPU, ${values.noop_wal_bytes} B WAL; 3 steps ${values.steps3_cpu_ms} ms, ${values.steps3_wal_bytes} B`,
    values,
    table,
    notes: [
      `${n.toLocaleString('en-US')} executions of each kind inserted in batches of 1,000 and drained by one worker (concurrency 32), on a fresh database.`,
      'CPU is every PostgreSQL server process (the whole server: run it alone); WAL from pg_current_wal_lsn(); rows from pg_stat_database.',
    ],
  };
}
