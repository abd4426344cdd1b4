import { createStepwiseClient, StepwiseApiError } from 'stepwise-workflows/client';

const stepwise = createStepwiseClient({ baseUrl: process.env.STEPWISE_URL ?? 'http://localhost:8080', token: process.env.STEPWISE_TOKEN });

// The same key again returns the same execution (created: false), so running this twice is safe.
const { execution_id, created } = await stepwise.schedule('order-approval', { orderId: 'A-1002', amountCents: 1999 }, { idempotencyKey: 'order-A-1002' });
console.log(created ? 'scheduled' : 'already scheduled', execution_id);

// An event is delivered only while the execution waits for it (else 409 not_waiting_for_event):
// it reserves stock first, so poll until it waits for `approval`, or has ended.
let execution = await stepwise.get(execution_id);
while (!execution.waiting_for_events.some((w) => w.event_name === 'approval') && !['completed', 'failed', 'cancelled'].includes(execution.status)) {
  await new Promise((resolve) => setTimeout(resolve, 200));
  execution = await stepwise.get(execution_id);
}
if (execution.status === 'waiting') await stepwise.sendEvent(execution_id, 'approval', { approved: true, approver: 'dana' });

const done = await stepwise.wait(execution_id, { deadlineMs: 60_000 });   // loops long-polls
console.log(done.status, JSON.stringify(done.output));

// Scheduled for an hour from now: pending until then, and cancellable until it ends.
const later = await stepwise.schedule('onboarding-drip', { email: 'bo@example.com', name: 'Bo' }, { startAt: new Date(Date.now() + 3_600_000) });
console.log((await stepwise.cancel(later.execution_id)).status);

try {
  await stepwise.cancel(execution_id);
} catch (err) {
  if (!(err instanceof StepwiseApiError && err.code === 'execution_not_cancellable')) throw err;
  console.log('already finished:', err.message);
}

// The raw openapi-fetch client, typed by path:
const { data } = await stepwise.raw.GET('/api/v1/executions', { params: { query: { task: 'order-approval', status: 'completed', limit: 10 } } });
console.log(`${data?.total} completed order approvals`);
