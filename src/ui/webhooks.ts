/** Pure: the webhooks page's form, checked in the browser as the contract checks it, and its delivery cells. */
import type { WebhookDelivery, WebhookEventType } from '../client';
import { formatDuration } from '../domain/format';

/** The events a webhook may subscribe to, in the contract's order (openapi.yaml's WebhookEventType). */
export const WEBHOOK_EVENTS: readonly WebhookEventType[] = Object.freeze(['execution.completed', 'execution.failed', 'execution.cancelled', 'execution.waiting']);

/** The contract's bounds: a URL of up to 2,048 characters, up to 100 task names of 1-255 characters. */
const URL_MAX_LENGTH = 2048;
const TASKS_MAX = 100;
const TASK_MAX_LENGTH = 255;

/** What the form holds: the URL and the task names as typed, the events ticked. */
export interface WebhookDraft {
  url: string;
  events: readonly WebhookEventType[];
  /** Comma-separated task names; empty for every task. */
  tasks: string;
}

/** One problem of the form, by its field. */
export interface DraftProblem {
  field: 'url' | 'events' | 'tasks';
  message: string;
}

/** The draft as the create call takes it, or what is wrong with it. */
export type CheckedDraft = { ok: true; url: string; events: WebhookEventType[]; tasks: string[] | undefined } | { ok: false; problems: DraftProblem[] };

/** Task names typed comma-separated: trimmed, blanks and repeats dropped; undefined (every task) when none is left. */
export function parseTaskNames(text: string): string[] | undefined {
  const names = [...new Set(text.split(',').map((t) => t.trim()))].filter((t) => t.length > 0);
  return names.length > 0 ? names : undefined;
}

/** `events` with `event` ticked or not, in the contract's order and each once. */
export function toggleEvent(events: readonly WebhookEventType[], event: WebhookEventType, ticked: boolean): WebhookEventType[] {
  return WEBHOOK_EVENTS.filter((e) => (e === event ? ticked : events.includes(e)));
}

function checkUrl(text: string): string | undefined {
  if (text === '') return 'Give the URL deliveries are POSTed to.';
  if (text.length > URL_MAX_LENGTH) return `At most ${URL_MAX_LENGTH} characters.`;
  if (!URL.canParse(text)) return 'Not a URL: write it whole, such as https://hooks.example.com/stepwise.';
  const url = new URL(text);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'Only http:// and https:// URLs can receive webhooks.';
  if (url.username || url.password) return 'No credentials in the URL: the signature (webhook-signature) authenticates deliveries.';
  return undefined;
}

/**
 * The browser-side check of the form, before anything is sent: what the contract refuses (a missing or
 * malformed URL, no event, too many or too long task names). Whether the server accepts the target
 * (private and metadata addresses) only the server can say: its 422 is shown as it comes.
 */
export function checkWebhookDraft(draft: WebhookDraft): CheckedDraft {
  const problems: DraftProblem[] = [];
  const url = draft.url.trim();
  const urlProblem = checkUrl(url);
  if (urlProblem) problems.push({ field: 'url', message: urlProblem });
  const events = WEBHOOK_EVENTS.filter((e) => draft.events.includes(e));
  if (events.length === 0) problems.push({ field: 'events', message: 'Tick at least one event.' });
  const tasks = parseTaskNames(draft.tasks);
  if (tasks && tasks.length > TASKS_MAX) problems.push({ field: 'tasks', message: `At most ${TASKS_MAX} tasks.` });
  const long = tasks?.find((t) => t.length > TASK_MAX_LENGTH);
  if (long) problems.push({ field: 'tasks', message: `A task name has at most ${TASK_MAX_LENGTH} characters.` });
  return problems.length > 0 ? { ok: false, problems } : { ok: true, url, events, tasks };
}

/** A webhook's task filter as the list shows it. */
export function describeTasks(tasks: readonly string[] | null): string {
  return tasks === null ? 'All tasks' : tasks.join(', ');
}

/** The latest attempt's latency (`84 ms`), or `–` before the first. */
export function describeLatency(d: Pick<WebhookDelivery, 'last_latency_ms'>): string {
  return d.last_latency_ms === null ? '–' : formatDuration(d.last_latency_ms);
}

/** The latest attempt's HTTP status, `no answer` when an attempt got none (timeout, refused), `–` before the first. */
export function describeStatusCode(d: Pick<WebhookDelivery, 'attempts' | 'last_status_code'>): string {
  if (d.last_status_code !== null) return String(d.last_status_code);
  return d.attempts > 0 ? 'no answer' : '–';
}
