import { randomUUID } from 'node:crypto';
import { defineTask, type TaskDefinition } from '../../src/index';
import { queryRows, type Db } from '../../src/store/db';
import { deliverEvent } from '../../src/store/executions';
import { createWebhook } from '../../src/store/webhooks';
import { newWebhookSecret } from '../../src/webhooks/signing';
import { waitUntil } from '../helpers/wait-until';
import type { WebhookReceiver } from '../helpers/webhook-receiver';
import { quietLog } from '../helpers/worker';
import { NotificationListener } from '../../src/store/listener';
import { startDeliverer } from './product-stack';

/** What a workload's run is given: the product's pool (counted), the measuring one (not), and the execution ids. */
export interface WorkloadEnv {
  product: Db;
  /** The product's URL, for a LISTEN connection. */
  url: string;
  measuring: Db;
  ids: string[];
  receiver: WebhookReceiver;
}

/** One fixed workload: its tasks, what each execution is scheduled with, and what it waits for. */
export interface Workload {
  name: string;
  /** The task definitions, made anew for each run (handlers count what they finished). */
  tasks(finished: { count: number }): TaskDefinition[];
  /** The data execution `i` is scheduled with. */
  data(i: number): unknown;
  /** Before the counting starts: what the workload needs in place (a webhook subscription). */
  prepare?(env: WorkloadEnv): Promise<void>;
  /** After the worker started: what the workload does from outside, until every execution has ended. */
  drive(env: WorkloadEnv, finished: { count: number }): Promise<void>;
  /** Whether the worker process runs its webhook deliverer (default true). */
  deliverer?: boolean;
  /** After the worker process stopped: what is left to do (deliveries). */
  finish?(env: WorkloadEnv): Promise<void>;
}

/** Executions per workload: the figures are totals divided by it. */
export const EXECUTIONS = 200;

const TASK = 'budget';
const allFinished = async (finished: { count: number }): Promise<void> => void (await waitUntil(() => finished.count >= EXECUTIONS, 'every handler to finish', 60000, 20));

const simple = (name: string, run: (ctx: Parameters<TaskDefinition['run']>[0], finished: { count: number }) => Promise<unknown>, extra: object = {}): Workload => ({
  name,
  tasks: (finished) => [defineTask({ name: TASK, ...extra, run: async (ctx) => run(ctx, finished) })],
  data: (i) => ({ i }),
  drive: (_env, finished) => allFinished(finished),
});

export const WORKLOADS: readonly Workload[] = [
  simple('noop', async (_ctx, f) => {
    f.count += 1;
    return null;
  }),
  simple('three-steps', async (ctx, f) => {
    for (const step of ['one', 'two', 'three']) await ctx.step(step, async () => step);
    f.count += 1;
    return null;
  }),
  simple('sleep', async (ctx, f) => {
    await ctx.sleep('nap', 100);
    f.count += 1;
    return null;
  }),
  {
    name: 'event-wait',
    tasks: (finished) => [
      defineTask({
        name: TASK,
        async run(ctx) {
          await ctx.waitForEvent('go');
          finished.count += 1;
          return null;
        },
      }),
    ],
    data: (i) => ({ i }),
    async drive(env, finished) {
      // Every execution waits before the events go: each delivery then finds its wait.
      const waiting = async () => (await queryRows<{ n: number }>(env.measuring, "SELECT count(*)::int AS n FROM stepwise.executions WHERE status = 'waiting'"))[0].n;
      await waitUntil(async () => (await waiting()) === EXECUTIONS, 'every execution to wait', 60000, 200);
      for (const id of env.ids) {
        const outcome = await deliverEvent(env.product, id, 'go', { ok: true });
        if (outcome.kind !== 'delivered') throw new Error(`event to ${id}: ${outcome.kind}`);
      }
      await allFinished(finished);
    },
  },
  {
    ...simple(
      'keyed-limit',
      async (_ctx, f) => {
        f.count += 1;
        return null;
      },
      { concurrency: { limit: 2, key: '/tenant' } },
    ),
    data: (i) => ({ tenant: `tenant-${i % 10}` }),
  },
  simple(
    'versioned',
    async (ctx, f) => {
      await ctx.step('one', async () => 1);
      f.count += 1;
      return null;
    },
    { version: '3' },
  ),
  {
    ...simple('webhook', async (_ctx, f) => {
      f.count += 1;
      return null;
    }),
    async prepare(env) {
      const secret = newWebhookSecret();
      await createWebhook(env.measuring, { id: randomUUID(), url: env.receiver.url('/budget'), events: ['execution.completed'], secret });
      env.receiver.setSecret('/budget', secret);
    },
    // Deliveries go out once every execution has completed, one at a time: a deliverer beside the
    // worker would claim however many happen to be queued, and the counts would follow the timing.
    deliverer: false,
    async finish(env) {
      const listener = new NotificationListener({ url: env.url, log: quietLog });
      const deliverer = await startDeliverer(env.product, env.url, listener, 1);
      try {
        await waitUntil(() => env.receiver.verifiedAt('/budget').length >= EXECUTIONS, 'every delivery', 60000, 20);
      } finally {
        await deliverer.stop();
        await listener.stop();
      }
    },
  },
];
