// Resume cost as history grows: an execution records N steps, sleeps, and is resumed when the sleep
// ends. Measured from the resuming claim to the completion, for a worker that keeps suspended
// handlers (the default: it resumes in place) and for one that replays the history (keepSuspended 0).
import type { Db } from '../../src/store/db';
import { createLogger } from '../../src/logger';
import { defineTask } from '../../src/engine/task';
import { upsertTasks } from '../../src/store/tasks';
import { TaskRegistry } from '../../src/engine/registry';
import { Worker } from '../../src/engine/worker';
import { insertExecutions } from '../../src/store/executions';

type FreshDatabase = (env: NodeJS.ProcessEnv) => Promise<{ url: string; db: Db; drop(): Promise<void> }>;

const log = createLogger({ level: 'warn', pretty: false });
const SIZES = [100, 6000];
const SAMPLES = 7;

const recording = defineTask({
  name: 'bench-resume',
  async run(ctx, data: unknown) {
    const n = (data as { n: number }).n;
    let sum = 0;
    // In batches, so the first run records its history quickly (the steps group-commit together).
    for (let i = 0; i < n; i += 100) {
      const batch = Array.from({ length: Math.min(100, n - i) }, (_, j) => ctx.step('s', () => i + j));
      for (const v of await Promise.all(batch)) sum += v;
    }
    await ctx.sleep('nap', 200);
    return sum;
  },
});

async function medianResume(t: { url: string; db: Db }, n: number, keepSuspended: number): Promise<number> {
  const resumes = new Map<string, (ms: number) => void>();
  const worker = new Worker({
    db: t.db,
    databaseUrl: t.url,
    tasks: [recording as never],
    log,
    concurrency: 4,
    pollIntervalMs: 50,
    keepSuspended,
    // The run that completes is the resume (the first run ends suspended in the sleep).
    observer: { finished: (_task, outcome, ms) => (outcome === 'completed' ? [...resumes.values()].shift()?.(ms) : undefined) },
  });
  await worker.start();
  const times: number[] = [];
  try {
    for (let i = 0; i < SAMPLES + 1; i++) {
      const done = new Promise<number>((resolve) => resumes.set('next', resolve));
      await insertExecutions(t.db, [{ task: 'bench-resume', data: { n } }]);
      const ms = await done;
      if (i > 0) times.push(ms); // the first warms the statements
    }
  } finally {
    await worker.stop();
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

/** The resume-to-completion time of executions with 100 and 6,000 recorded steps, in place and replayed. */
export async function resumeCost(env: NodeJS.ProcessEnv, freshDatabase: FreshDatabase) {
  const t = await freshDatabase(env);
  await upsertTasks(t.db, new TaskRegistry([recording as never]).toRegistrations());
  const values: Record<string, number> = {};
  try {
    for (const n of SIZES) {
      values[`in_place_${n}_ms`] = await medianResume(t, n, 256);
      values[`replayed_${n}_ms`] = await medianResume(t, n, 0);
    }
  } finally {
    await t.drop();
  }
  const [small, large] = SIZES;
  const ratio = Math.round((values[`in_place_${large}_ms`] / values[`in_place_${small}_ms`]) * 100) / 100;
  return {
    label: 'resume after a sleep: claim -> completion, by history length',
    summary:
      `in place ${values[`in_place_${small}_ms`]} ms at ${small} steps, ${values[`in_place_${large}_ms`]} ms at ${large} (ratio ${ratio}); ` +
      `replayed ${values[`replayed_${small}_ms`]} ms and ${values[`replayed_${large}_ms`]} ms (medians of ${SAMPLES})`,
    values: { ...values, ratio },
  };
}
