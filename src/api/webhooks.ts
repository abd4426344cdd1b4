import type Router from '@koa/router';
import type { components } from '../../generated/openapi';
import { isExecutionId, newExecutionId } from '../domain/ids';
import { InvalidDataError, WebhookNotFoundError } from '../errors';
import { createWebhook, deleteWebhook, enqueueTestDelivery, listDeliveries, listWebhooks, webhookExists, type DeliveryRecord, type WebhookRecord } from '../store/webhooks';
import { newWebhookSecret } from '../webhooks/signing';
import { refusalOfUrl, type TargetPolicy } from '../webhooks/targets';
import type { ApiDeps } from './deps';
import type { ApiState } from './state';
import { addOperation } from './typed';

type Schemas = components['schemas'];

function toWebhook(w: WebhookRecord): Schemas['Webhook'] {
  return { webhook_id: w.id, url: w.url, events: w.events, tasks: w.tasks, created_at: w.createdAt.toISOString() };
}

function toDelivery(d: DeliveryRecord): Schemas['WebhookDelivery'] {
  const last = d.log.at(-1);
  return {
    delivery_id: d.id,
    event_type: d.eventType as Schemas['WebhookDelivery']['event_type'],
    execution_id: d.executionId,
    status: d.status,
    attempts: d.attempts,
    created_at: d.createdAt.toISOString(),
    last_attempt_at: last ? last.at.toISOString() : null,
    next_attempt_at: d.nextAttemptAt ? d.nextAttemptAt.toISOString() : null,
    last_status_code: last ? last.statusCode : null,
    last_latency_ms: last ? last.latencyMs : null,
    last_error: last ? last.error : null,
    attempt_log: d.log.map((a) => ({ attempted_at: a.at.toISOString(), status_code: a.statusCode, latency_ms: a.latencyMs, error: a.error })),
  };
}

/**
 * Webhook subscriptions and their deliveries. The targets a subscription may name are checked here
 * (webhooks/targets.ts) and again by the deliverers at every connection.
 */
export function addWebhookRoutes(router: Router<ApiState>, deps: ApiDeps, policy: TargetPolicy = { allowPrivate: deps.config.webhooks.allowPrivateTargets }): void {
  const { db } = deps;

  /** Ids that are not UUIDs never reach the database: they name no webhook. */
  const requireWebhook = async (id: string) => {
    if (!isExecutionId(id) || !(await webhookExists(db, id))) throw new WebhookNotFoundError(id);
  };

  addOperation(router, deps.routes, 'createWebhook', async ({ body }) => {
    const refusal = await refusalOfUrl(body.url, policy);
    if (refusal) throw new InvalidDataError("the webhook's target is refused", [{ path: 'body/url', message: refusal }]);
    // The secret leaves the server in this answer only; it is stored to sign deliveries.
    const secret = newWebhookSecret();
    const webhook = await createWebhook(db, { id: newExecutionId(), url: body.url, events: body.events, tasks: body.tasks, secret });
    return { status: 201, body: { ...toWebhook(webhook), secret } };
  });

  addOperation(router, deps.routes, 'listWebhooks', async () => {
    return { status: 200, body: { webhooks: (await listWebhooks(db)).map(toWebhook) } };
  });

  addOperation(router, deps.routes, 'deleteWebhook', async ({ params }) => {
    if (!isExecutionId(params.webhook_id) || !(await deleteWebhook(db, params.webhook_id))) throw new WebhookNotFoundError(params.webhook_id);
    return { status: 204, body: undefined };
  });

  addOperation(router, deps.routes, 'listWebhookDeliveries', async ({ params, query }) => {
    await requireWebhook(params.webhook_id);
    // Validation applied the spec's defaults and clamped limit, so these are always set.
    const limit = query.limit as number;
    const offset = query.offset as number;
    const page = await listDeliveries(db, params.webhook_id, limit, offset);
    return { status: 200, body: { deliveries: page.items.map(toDelivery), total: page.total, limit, offset } };
  });

  addOperation(router, deps.routes, 'testWebhook', async ({ params }) => {
    const delivery = isExecutionId(params.webhook_id) ? await enqueueTestDelivery(db, params.webhook_id, newExecutionId()) : undefined;
    if (!delivery) throw new WebhookNotFoundError(params.webhook_id);
    return { status: 202, body: toDelivery(delivery) };
  });
}
