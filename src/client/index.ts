import createClient, { type Client } from 'openapi-fetch';
import type { components, operations, paths } from '../../generated/openapi';
import { isTransientFailure, StepwiseApiError, StepwiseWaitTimeoutError, toApiError } from './errors';
import { watchExecution, watchExecutionChanges, type ExecutionChangesEvent } from './watch';

export { StepwiseApiError, StepwiseWaitTimeoutError };
export type { ExecutionChangesEvent };
export type { StepwiseErrorCode, StepwiseErrorDetail, StepwiseErrorFacts } from './errors';
export type { paths, operations, components };

type Schemas = components['schemas'];
export type Execution = Schemas['Execution'];
export type ExecutionSummary = Schemas['ExecutionSummary'];
export type ExecutionStatus = Schemas['ExecutionStatus'];
export type ExecutionList = Schemas['ExecutionList'];
export type ScheduledExecution = Schemas['ScheduledExecution'];
export type CancelledExecution = Schemas['CancelledExecution'];
export type EventDelivered = Schemas['EventDelivered'];
export type WaitTimedOut = Schemas['WaitTimedOut'];
export type Step = Schemas['Step'];
/** A page of an execution's steps; `next_after_seq` reads the next (null on the last). */
export type StepList = Schemas['StepList'];
/** Which page of steps to read: after the step `afterSeq` (omitted: the first), `limit` at most. */
export interface StepPageOptions {
  afterSeq?: number;
  limit?: number;
}
export type Task = Schemas['Task'];
/** A worker process as GET /api/v1/workers reports it (not the `Worker` class of `stepwise`, which runs tasks). */
export type WorkerInfo = Schemas['Worker'];
export type WorkerState = Schemas['WorkerState'];
export type ErrorEnvelope = Schemas['ErrorEnvelope'];
export type ListFilter = NonNullable<operations['listExecutions']['parameters']['query']>;
export type Attempt = Schemas['Attempt'];
/** Executions created, completed and failed per minute over a window (GET /stats/throughput). */
export type Throughput = Schemas['Throughput'];
export type ThroughputBucket = Schemas['ThroughputBucket'];
export type ThroughputQuery = NonNullable<operations['getThroughput']['parameters']['query']>;
export type RetriedExecution = Schemas['RetriedExecution'];
/** A bulk action's filter; `limit` defaults to 1,000 (the server's default). */
export type BulkFilter = Partial<Schemas['BulkFilter']>;
export type BulkResult = Schemas['BulkResult'];
/** Which executions of a task a bulk upgrade moves, and to which version (null: the task without one); `limit` defaults to 1,000. */
export type BulkUpgradeRequest = Omit<Schemas['BulkUpgradeRequest'], 'limit'> & Partial<Pick<Schemas['BulkUpgradeRequest'], 'limit'>>;
export type UpgradedExecution = Schemas['UpgradedExecution'];
/** One version of a task's code in GET /tasks: the live workers serving it and its executions in flight. */
export type TaskVersionState = Schemas['TaskVersionState'];
/** Where a replay met another durable operation than its history recorded (on a NonDeterminismError). */
export type Divergence = Schemas['Divergence'];
export type TaskPauseState = Schemas['TaskPauseState'];
/** The data of a `changed` event of GET /executions/changes: an execution and its status now. */
export type ExecutionChange = Schemas['ExecutionChange'];
export type Webhook = Schemas['Webhook'];
/** A new webhook, with its signing secret (shown only in the answer that created it). */
export type CreatedWebhook = Schemas['CreatedWebhook'];
export type WebhookEventType = Schemas['WebhookEventType'];
export type WebhookDelivery = Schemas['WebhookDelivery'];
export type WebhookDeliveryList = Schemas['WebhookDeliveryList'];
/** The JSON body Stepwise POSTs to a webhook. */
export type WebhookPayload = Schemas['WebhookPayload'];

export interface StepwiseClientOptions {
  /** The server's URL including its base path, such as `http://127.0.0.1:8080` or `https://host/sw`. */
  baseUrl: string;
  /** A bearer token, when the server has tokens configured. */
  token?: string;
  /** A fetch implementation (tests, proxies, custom agents); defaults to globalThis.fetch. */
  fetch?: (input: Request) => Promise<Response>;
}

export interface ScheduleOptions {
  /** At most one execution exists per key: a repeat with the same task returns it (`created: false`). */
  idempotencyKey?: string;
  /** Start no earlier than this: a Date, or an ISO 8601 string with a time zone. In the past means at once. */
  startAt?: Date | string;
  /** Up to 20 distinct labels of 1-64 characters, to find the execution by with `list({ tag })`. */
  tags?: string[];
  /** Claimed before due executions of lower priority (-1,000,000 to 1,000,000, default 0). */
  priority?: number;
}

export interface WaitOptions {
  /** Seconds each long-poll may last (server maximum 3600). Default 30; Node's fetch cuts at 300. */
  timeoutSeconds?: number;
  /** Milliseconds from now after which `wait` gives up with StepwiseWaitTimeoutError. Default: no deadline. */
  deadlineMs?: number;
  signal?: AbortSignal;
}

/** The openapi-fetch result, narrowed to its data or thrown as a StepwiseApiError. */
async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<{ data: T; response: Response }> {
  const { data, error, response } = await call;
  if (!response.ok) throw toApiError(response, error);
  return { data: data as T, response };
}

/**
 * A bulk action to its end. The server answers each request within its time budget, with a
 * `next_cursor` while the action goes on; the same body goes back with it until it is null, and the
 * answers are summed. Given a `cursor`, only that request is made: the caller drives the action.
 */
async function wholeBulkAction<B extends { cursor?: string }>(body: B, send: (body: B) => Promise<BulkResult>): Promise<BulkResult> {
  if (body.cursor !== undefined) return send(body);
  const total: BulkResult = { matched: 0, changed: 0, next_cursor: null };
  let cursor: string | null | undefined;
  do {
    const answer = await send(cursor ? { ...body, cursor } : body);
    total.matched += answer.matched;
    total.changed += answer.changed;
    cursor = answer.next_cursor;
  } while (cursor);
  return total;
}

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });
}

/**
 * A typed Stepwise client: `raw` is openapi-fetch over the generated paths (every operation, typed
 * `{ data } | { error }` answers); the helpers return data and throw StepwiseApiError on error answers.
 */
export function createStepwiseClient(options: StepwiseClientOptions) {
  const raw: Client<paths> = createClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    fetch: options.fetch,
    headers: options.token ? { Authorization: `Bearer ${options.token}` } : undefined,
  });

  async function readStepPage(id: string, page: StepPageOptions = {}): Promise<StepList> {
    const query = { limit: page.limit, after_seq: page.afterSeq };
    return (await unwrap(raw.GET('/api/v1/executions/{id}/steps', { params: { path: { id }, query } }))).data;
  }

  async function waitOnce(id: string, timeoutSeconds: number, signal?: AbortSignal) {
    const { data, response } = await unwrap(
      raw.GET('/api/v1/executions/{id}/wait', { params: { path: { id }, query: { timeout: timeoutSeconds } }, signal }),
    );
    return response.status === 200 ? { done: true as const, execution: data as Execution } : { done: false as const, pending: data as WaitTimedOut };
  }

  return {
    raw,

    /**
     * Schedules an execution of `task` with `data` (a JSON object, `{}` when omitted); with an
     * idempotency key, a repeat returns the same execution.
     * With `startAt`, it stays pending until then (a Date, or an ISO 8601 string with a time zone).
     * With `tags`, `list({ tag: [...] })` finds it. With `priority`, it is claimed before due
     * executions of lower priority. For a debounced task, `debounced` says whether this schedule
     * updated the execution still pending (200) rather than making one (201).
     */
    async schedule(task: string, data: Record<string, unknown> = {}, opts: ScheduleOptions = {}): Promise<ScheduledExecution & { created: boolean }> {
      const body: Schemas['ScheduleExecutionRequest'] = { task, data };
      if (opts.idempotencyKey !== undefined) body.idempotency_key = opts.idempotencyKey;
      if (opts.startAt !== undefined) body.start_at = opts.startAt instanceof Date ? opts.startAt.toISOString() : opts.startAt;
      if (opts.tags !== undefined) body.tags = opts.tags;
      if (opts.priority !== undefined) body.priority = opts.priority;
      const { data: created, response } = await unwrap(raw.POST('/api/v1/executions', { body }));
      return { ...created, created: response.status === 201 };
    },

    async get(id: string): Promise<Execution> {
      return (await unwrap(raw.GET('/api/v1/executions/{id}', { params: { path: { id } } }))).data;
    },

    async list(filter: ListFilter = {}): Promise<ExecutionList> {
      return (await unwrap(raw.GET('/api/v1/executions', { params: { query: filter } }))).data;
    },

    /**
     * Long-polls until the execution is completed, failed or cancelled and returns it; retries through
     * brief outages (503, network errors). Throws StepwiseWaitTimeoutError at the deadline.
     */
    async wait(id: string, opts: WaitOptions = {}): Promise<Execution> {
      const perPoll = opts.timeoutSeconds ?? 30;
      const deadline = opts.deadlineMs === undefined ? Infinity : Date.now() + opts.deadlineMs;
      let lastStatus = 'pending';
      let backoffMs = 100;
      for (;;) {
        const left = deadline - Date.now();
        const seconds = Math.max(0, Math.min(perPoll, Math.ceil(left / 1000)));
        try {
          const result = await waitOnce(id, seconds, opts.signal);
          if (result.done) return result.execution;
          lastStatus = result.pending.status;
          backoffMs = 100;
        } catch (err) {
          if (!isTransientFailure(err) || Date.now() >= deadline) throw err;
          const hinted = err instanceof StepwiseApiError && err.retryAfterSeconds !== undefined ? err.retryAfterSeconds * 1000 : backoffMs;
          await delay(Math.min(5000, hinted, Math.max(0, deadline - Date.now())), opts.signal);
          backoffMs = Math.min(5000, backoffMs * 2);
        }
        if (Date.now() >= deadline) throw new StepwiseWaitTimeoutError(id, lastStatus);
      }
    },

    /**
     * Follows an execution live (GET /executions/{id}/stream): yields its current state, then each
     * new state (status changes, steps completed, waits), and ends after the completed, failed or
     * cancelled one. A dropped connection (a network error, the server restarting) is opened again
     * and yields the current state again, so consumers see every state at least once, possibly
     * twice; an unknown id throws StepwiseApiError (404). Ends quietly when `signal` aborts.
     *
     * ```ts
     * for await (const e of client.watch(id)) console.log(e.status, e.steps_completed);
     * ```
     */
    watch(id: string, opts: { signal?: AbortSignal } = {}): AsyncIterable<Execution> {
      return watchExecution(raw, id, opts.signal);
    },

    /**
     * Follows the status changes of every execution, or of one task's (GET /executions/changes), for
     * views of many executions: yields `{ type: 'changed', change }` per status change and
     * `{ type: 'sync' }` on every (re)connection or when changes may have been missed (re-read then).
     * Reconnects as `watch` does; never ends by itself: stop it with `signal` or by breaking out.
     */
    watchChanges(opts: { task?: string; signal?: AbortSignal } = {}): AsyncIterable<ExecutionChangesEvent> {
      return watchExecutionChanges(raw, opts.task, opts.signal);
    },

    /** Cancels a pending, running or waiting execution (again is fine); completed or failed throw 409. */
    async cancel(id: string): Promise<CancelledExecution> {
      return (await unwrap(raw.POST('/api/v1/executions/{id}/cancel', { params: { path: { id } } }))).data;
    },

    /** Delivers event `name` with `payload` (any JSON value) to an execution that waits for it. */
    /**
     * Delivers an event. With `idempotencyKey`, a retry of a delivery whose answer was lost gets the
     * first delivery's answer again instead of 409 (the `Idempotency-Key` header).
     */
    async sendEvent(id: string, name: string, payload: unknown = null, options: { idempotencyKey?: string } = {}): Promise<EventDelivered> {
      const header = options.idempotencyKey === undefined ? {} : { 'Idempotency-Key': options.idempotencyKey };
      return (
        await unwrap(raw.POST('/api/v1/events/{id}/{event_name}', { params: { path: { id, event_name: name }, header }, body: payload }))
      ).data;
    },

    /**
     * One page of an execution's steps: up to `limit` after the step `afterSeq` (omitted: the first),
     * fewer once their results pass the server's page size. `next_after_seq` reads the next page.
     */
    listStepPage: readStepPage,

    /** Every step of an execution, in call order, read page by page (all in memory: see listStepPage for large histories). */
    async listSteps(id: string): Promise<Step[]> {
      const steps: Step[] = [];
      let afterSeq: number | undefined;
      do {
        const page = await readStepPage(id, { afterSeq });
        steps.push(...page.items);
        afterSeq = page.next_after_seq ?? undefined;
      } while (afterSeq !== undefined);
      return steps;
    },

    async listTasks(): Promise<Task[]> {
      return (await unwrap(raw.GET('/api/v1/tasks'))).data.items;
    },

    /** The registered workers, oldest first: `active`, `stopping`, or `lost` once they missed their heartbeats. */
    async listWorkers(): Promise<WorkerInfo[]> {
      return (await unwrap(raw.GET('/api/v1/workers'))).data.workers;
    },

    /** Executions created, completed and failed per minute over the last `window` (1h by default), for every task or one. */
    async throughput(query: ThroughputQuery = {}): Promise<Throughput> {
      return (await unwrap(raw.GET('/api/v1/stats/throughput', { params: { query } }))).data;
    },

    /** Every attempt of the execution, oldest first, with errors (and bounded stacks) for the operator. */
    async listAttempts(id: string): Promise<Attempt[]> {
      return (await unwrap(raw.GET('/api/v1/executions/{id}/attempts', { params: { path: { id } } }))).data.attempts;
    },

    /** Puts a failed or cancelled execution back to pending, to resume from where it stopped; other statuses throw 409. */
    async retry(id: string): Promise<RetriedExecution> {
      return (await unwrap(raw.POST('/api/v1/executions/{id}/retry', { params: { path: { id } } }))).data;
    },

    /**
     * Pins a pending or waiting execution (or a running one whose worker is gone) to `version` of its
     * task (null: the task defined without one), for workers serving it to claim; a finished one, one
     * a live worker holds, or a version no live worker serves throws 409.
     */
    async upgrade(id: string, version: string | null): Promise<UpgradedExecution> {
      return (await unwrap(raw.POST('/api/v1/executions/{id}/upgrade', { params: { path: { id } }, body: { version } }))).data;
    },

    /**
     * Cancels what the filter matches (pending, running or waiting), each in a statement of its own,
     * to the end of the action (see wholeBulkAction); with `cursor`, that one request only.
     */
    async bulkCancel(filter: BulkFilter = {}): Promise<BulkResult> {
      return wholeBulkAction(filter, async (body) => (await unwrap(raw.POST('/api/v1/executions/bulk-cancel', { body: body as Schemas['BulkFilter'] }))).data);
    },

    /** Retries what the filter matches (failed or cancelled), each in a statement of its own, as bulkCancel goes. */
    async bulkRetry(filter: BulkFilter = {}): Promise<BulkResult> {
      return wholeBulkAction(filter, async (body) => (await unwrap(raw.POST('/api/v1/executions/bulk-retry', { body: body as Schemas['BulkFilter'] }))).data);
    },

    /** Moves the executions of a task the filter matches (pending, waiting, running on a gone worker) to another version, each in a statement of its own, as bulkCancel goes. */
    async bulkUpgrade(request: BulkUpgradeRequest): Promise<BulkResult> {
      return wholeBulkAction(request, async (body) => (await unwrap(raw.POST('/api/v1/executions/bulk-upgrade', { body: body as Schemas['BulkUpgradeRequest'] }))).data);
    },

    /** Stops claiming the task's executions (they stay pending); running ones finish. */
    async pauseTask(name: string): Promise<TaskPauseState> {
      return (await unwrap(raw.POST('/api/v1/tasks/{name}/pause', { params: { path: { name } } }))).data;
    },

    /** Lets the task's executions be claimed again, at once. */
    async resumeTask(name: string): Promise<TaskPauseState> {
      return (await unwrap(raw.POST('/api/v1/tasks/{name}/resume', { params: { path: { name } } }))).data;
    },

    /**
     * Subscribes `url` to execution events, for every task or only `tasks`. The answer's `secret`
     * verifies the deliveries' signatures and is never shown again.
     */
    async createWebhook(url: string, events: WebhookEventType[], opts: { tasks?: string[] } = {}): Promise<CreatedWebhook> {
      const body: Schemas['CreateWebhookRequest'] = { url, events };
      if (opts.tasks !== undefined) body.tasks = opts.tasks;
      return (await unwrap(raw.POST('/api/v1/webhooks', { body }))).data;
    },

    /** The subscribed webhooks, oldest first, without their secrets. */
    async listWebhooks(): Promise<Webhook[]> {
      return (await unwrap(raw.GET('/api/v1/webhooks'))).data.webhooks;
    },

    /** Unsubscribes a webhook; its pending deliveries are dropped. */
    async deleteWebhook(id: string): Promise<void> {
      await unwrap(raw.DELETE('/api/v1/webhooks/{webhook_id}', { params: { path: { webhook_id: id } } }));
    },

    /** A page of a webhook's deliveries, newest first, with their latest attempts. */
    async listWebhookDeliveries(id: string, page: { limit?: number; offset?: number } = {}): Promise<WebhookDeliveryList> {
      return (await unwrap(raw.GET('/api/v1/webhooks/{webhook_id}/deliveries', { params: { path: { webhook_id: id }, query: page } }))).data;
    },

    /** Queues a `webhook.test` message to the webhook and returns its delivery. */
    async testWebhook(id: string): Promise<WebhookDelivery> {
      return (await unwrap(raw.POST('/api/v1/webhooks/{webhook_id}/test', { params: { path: { webhook_id: id } } }))).data;
    },
  };
}

/** The client `createStepwiseClient` returns. */
export type StepwiseClient = ReturnType<typeof createStepwiseClient>;
