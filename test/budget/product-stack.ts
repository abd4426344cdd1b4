import { CountFolder } from '../../src/engine/count-folder';
import type { TaskDefinition } from '../../src/engine/task';
import type { Db } from '../../src/store/db';
import { NotificationListener } from '../../src/store/listener';
import { WebhookDeliverer } from '../../src/webhooks/deliverer';
import { quietLog, startWorker } from '../helpers/worker';

/** A webhook deliverer with the product's defaults, or with `concurrency` attempts at once. */
export async function startDeliverer(db: Db, url: string, listener: NotificationListener, concurrency?: number): Promise<WebhookDeliverer> {
  const deliverer = new WebhookDeliverer({ db, databaseUrl: url, listener, log: quietLog, policy: { allowPrivate: true }, concurrency });
  await deliverer.start();
  return deliverer;
}

/** What a worker process runs, as src/main.ts composes it; stop() in main's order. */
export interface ProductStack {
  stop(): Promise<void>;
}

/**
 * A worker process's parts on `db`: the count folder, the shared LISTEN connection, the webhook
 * deliverer (unless `deliverer` is false) and the worker, with the product's defaults except the worker's concurrency of 1 and no
 * prefetch: claims and completions then never share a statement by chance of timing, and the
 * counts repeat from run to run.
 */
export async function startProductStack(db: Db, url: string, tasks: TaskDefinition[], options: { deliverer: boolean }): Promise<ProductStack> {
  const folder = new CountFolder({ db, log: quietLog });
  folder.start();
  const listener = new NotificationListener({ url, log: quietLog });
  const deliverer = options.deliverer ? await startDeliverer(db, url, listener) : undefined;
  const worker = await startWorker({ db, url, drop: async () => undefined }, tasks, {
    listener,
    concurrency: 1,
    prefetch: 0,
    leaseMs: undefined,
    pollIntervalMs: undefined,
    shutdownGraceMs: undefined,
  });
  return {
    async stop() {
      await worker.stop();
      await deliverer?.stop();
      await listener.stop();
      await folder.stop();
    },
  };
}
