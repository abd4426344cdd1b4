import { getSpec } from '../../src/api/spec';
import { WEBHOOK_EVENT_TYPES as CLI_EVENTS } from '../../src/cli/webhooks';
import { WEBHOOK_EVENT_TYPES as STORE_EVENTS } from '../../src/store/webhooks';
import { parseRoute, routeHref } from '../../src/ui/routes';
import { checkWebhookDraft, describeLatency, describeStatusCode, describeTasks, parseTaskNames, toggleEvent, WEBHOOK_EVENTS } from '../../src/ui/webhooks';

const ALL = [...WEBHOOK_EVENTS];

describe('the webhook form', () => {
  it('offers the events the contract lists, in its order, as the store and the CLI do', () => {
    const { components } = getSpec().document as { components: { schemas: { WebhookEventType: { enum: string[] } } } };
    expect(WEBHOOK_EVENTS).toEqual(components.schemas.WebhookEventType.enum);
    expect(WEBHOOK_EVENTS).toEqual(STORE_EVENTS);
    expect(CLI_EVENTS).toEqual(STORE_EVENTS);
  });

  it('reads task names comma-separated, trimmed, each once; none means every task', () => {
    expect(parseTaskNames(' approve-order, ship ,approve-order,, ')).toEqual(['approve-order', 'ship']);
    expect(parseTaskNames('')).toBeUndefined();
    expect(parseTaskNames(' , ')).toBeUndefined();
  });

  it('ticks and unticks events keeping the contract order, each once', () => {
    expect(toggleEvent(['execution.waiting'], 'execution.completed', true)).toEqual(['execution.completed', 'execution.waiting']);
    expect(toggleEvent(ALL, 'execution.failed', false)).toEqual(['execution.completed', 'execution.cancelled', 'execution.waiting']);
    expect(toggleEvent(['execution.failed'], 'execution.failed', true)).toEqual(['execution.failed']);
  });

  it('accepts an http(s) URL with events, and gives the create call trimmed values', () => {
    expect(checkWebhookDraft({ url: ' https://hooks.example.com/stepwise ', events: ['execution.failed'], tasks: 'a, b' })).toEqual({
      ok: true,
      url: 'https://hooks.example.com/stepwise',
      events: ['execution.failed'],
      tasks: ['a', 'b'],
    });
    expect(checkWebhookDraft({ url: 'http://127.0.0.1:9000/hook', events: ALL, tasks: '' })).toEqual({ ok: true, url: 'http://127.0.0.1:9000/hook', events: ALL, tasks: undefined });
  });

  it.each([
    ['', 'Give the URL deliveries are POSTed to.'],
    ['hooks.example.com/stepwise', 'Not a URL: write it whole, such as https://hooks.example.com/stepwise.'],
    ['ftp://hooks.example.com/', 'Only http:// and https:// URLs can receive webhooks.'],
    ['https://user:pw@hooks.example.com/', 'No credentials in the URL: the signature (webhook-signature) authenticates deliveries.'],
    [`https://h.example/${'x'.repeat(2048)}`, 'At most 2048 characters.'],
  ])('refuses the URL %p before sending anything', (url, message) => {
    expect(checkWebhookDraft({ url, events: ALL, tasks: '' })).toEqual({ ok: false, problems: [{ field: 'url', message }] });
  });

  it('needs an event, and task names the contract takes', () => {
    const result = checkWebhookDraft({ url: 'https://h.example/', events: [], tasks: Array.from({ length: 101 }, (_, i) => `t${i}`).join(',') });
    expect(result).toEqual({
      ok: false,
      problems: [
        { field: 'events', message: 'Tick at least one event.' },
        { field: 'tasks', message: 'At most 100 tasks.' },
      ],
    });
    expect(checkWebhookDraft({ url: 'https://h.example/', events: ALL, tasks: 'x'.repeat(256) })).toEqual({
      ok: false,
      problems: [{ field: 'tasks', message: 'A task name has at most 255 characters.' }],
    });
  });
});

describe('webhook cells', () => {
  it('describes tasks, latency and the last status code', () => {
    expect(describeTasks(null)).toBe('All tasks');
    expect(describeTasks(['a', 'b'])).toBe('a, b');
    expect(describeLatency({ last_latency_ms: null })).toBe('–');
    expect(describeLatency({ last_latency_ms: 84 })).toBe('84 ms');
    expect(describeLatency({ last_latency_ms: 10_000 })).toBe('10 s');
    expect(describeStatusCode({ attempts: 0, last_status_code: null })).toBe('–');
    expect(describeStatusCode({ attempts: 2, last_status_code: null })).toBe('no answer');
    expect(describeStatusCode({ attempts: 1, last_status_code: 503 })).toBe('503');
  });
});

describe('webhook routes', () => {
  it('round-trips the webhooks page, with and without a chosen webhook', () => {
    expect(parseRoute('#/webhooks')).toEqual({ page: 'webhooks' });
    expect(parseRoute('#/webhooks/0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9e01')).toEqual({ page: 'webhooks', id: '0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9e01' });
    for (const hash of ['#/webhooks', '#/webhooks/0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9e01']) expect(routeHref(parseRoute(hash))).toBe(hash);
  });
});
