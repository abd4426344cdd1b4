/**
 * The `webhooks` commands: subscribe a URL to execution events, list and remove subscriptions, see a
 * webhook's deliveries and send it a test message, over the typed HTTP client like the other operator
 * commands.
 */
import { InvalidArgumentError, type Command } from 'commander';
import type { WebhookEventType } from '../client';
import { collect, parseCount } from './arguments';
import { commandGroup, print, printJson, withClient, withConnectionOptions, type ConnectionFlags } from './command-runner';
import { renderCreatedWebhook, renderRemovedWebhook, renderTestQueued, renderWebhookDeliveries, renderWebhooks } from './render-webhooks';

/** The events a webhook may subscribe to (openapi.yaml's WebhookEventType); `add` takes all of them by default. */
export const WEBHOOK_EVENT_TYPES: readonly WebhookEventType[] = Object.freeze(['execution.completed', 'execution.failed', 'execution.cancelled', 'execution.waiting']);

function isWebhookEventType(value: string): value is WebhookEventType {
  return (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value);
}

/** A repeatable --event: each one checked against the contract's list, and each kept once (the API refuses repeats). */
function collectEvent(value: string, previous: WebhookEventType[] | undefined): WebhookEventType[] {
  if (!isWebhookEventType(value)) throw new InvalidArgumentError(`must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}`);
  return previous?.includes(value) ? previous : [...(previous ?? []), value];
}

/** A repeatable --task, each name kept once (the API refuses repeats). */
function collectTask(value: string, previous: string[] | undefined): string[] {
  return previous?.includes(value) ? previous : collect(value, previous);
}

interface AddFlags extends ConnectionFlags {
  event?: WebhookEventType[];
  task?: string[];
}

/** Adds `stepwise webhooks …` to `program`. */
export function addWebhookCommands(program: Command): void {
  const webhooks = commandGroup(program, 'webhooks', 'subscribe URLs to execution events (signed HTTP POSTs), and follow their deliveries');

  withConnectionOptions(webhooks.command('list').description('the subscribed webhooks, oldest first (never their secrets)')).action(async (flags: ConnectionFlags) =>
    withClient(flags, async (client) => {
      const list = await client.listWebhooks();
      if (flags.json) printJson({ webhooks: list });
      else print(renderWebhooks(list));
    }),
  );

  withConnectionOptions(
    webhooks
      .command('add')
      .description('subscribe URL to execution events; prints its signing secret, which is shown only this once')
      .argument('<url>', 'where deliveries are POSTed: http:// or https://, without credentials'),
  )
    .option('--event <type>', `an event to deliver; repeat it for several (default: all of ${WEBHOOK_EVENT_TYPES.join(', ')})`, collectEvent)
    .option('--task <name>', 'only executions of this task; repeat it for several (default: every task)', collectTask)
    .addHelpText(
      'after',
      '\nPrivate and loopback targets are refused (422) unless the server allows private targets\n' +
        '(STEPWISE_WEBHOOKS_ALLOW_PRIVATE; `stepwise dev` does); link-local and cloud metadata addresses always are.',
    )
    .action(async (url: string, flags: AddFlags) =>
      withClient(flags, async (client) => {
        const created = await client.createWebhook(url, flags.event ?? [...WEBHOOK_EVENT_TYPES], { tasks: flags.task });
        if (flags.json) printJson(created);
        else print(renderCreatedWebhook(created));
      }),
    );

  withConnectionOptions(
    webhooks
      .command('remove')
      .description('unsubscribe a webhook; its pending deliveries are not attempted again')
      .argument('<id>', 'the webhook id'),
  )
    .addHelpText('after', '\nWith --json it prints nothing: the API answers 204 without a body.')
    .action(async (id: string, flags: ConnectionFlags) =>
      withClient(flags, async (client) => {
        await client.deleteWebhook(id);
        if (!flags.json) print(renderRemovedWebhook(id));
      }),
    );

  withConnectionOptions(
    webhooks
      .command('deliveries')
      .description("a webhook's deliveries, newest first: status, attempts, the last answer and when the next attempt is due")
      .argument('<id>', 'the webhook id'),
  )
    .option('--limit <n>', 'page size, up to 500 (default 50)', parseCount(1))
    .option('--offset <n>', 'deliveries to skip (default 0)', parseCount(0))
    .action(async (id: string, flags: ConnectionFlags & { limit?: number; offset?: number }) =>
      withClient(flags, async (client) => {
        const list = await client.listWebhookDeliveries(id, { limit: flags.limit, offset: flags.offset });
        if (flags.json) printJson(list);
        else print(renderWebhookDeliveries(list));
      }),
    );

  withConnectionOptions(
    webhooks
      .command('test')
      .description('queue a signed webhook.test message to a webhook; a worker process delivers it')
      .argument('<id>', 'the webhook id'),
  ).action(async (id: string, flags: ConnectionFlags) =>
    withClient(flags, async (client) => {
      const delivery = await client.testWebhook(id);
      if (flags.json) printJson(delivery);
      else print(renderTestQueued(id, delivery));
    }),
  );
}
