import { defineTask, NonRetryableError, Type } from 'stepwise-workflows';

/**
 * Calls a payment API that fails now and then. Transient failures (HTTP 503) are retried with
 * exponential backoff and jitter, the step alone; a declined card (HTTP 402) is a NonRetryableError
 * and fails at once. The "API" is simulated so the demo needs no network: the step's first
 * `failFirst` attempts fail with 503, and `declined: true` answers 402.
 *
 *   curl -X POST localhost:8080/api/v1/executions -H 'content-type: application/json' \
 *     -d '{"task":"flaky-api","data":{"paymentId":"p-1","failFirst":2}}'
 */
export const flakyApi = defineTask({
  name: 'flaky-api',
  data: Type.Object(
    {
      paymentId: Type.String({ minLength: 1 }),
      failFirst: Type.Optional(Type.Integer({ minimum: 0, maximum: 10, default: 2 })),
      declined: Type.Optional(Type.Boolean()),
    },
    { additionalProperties: false },
  ),
  retry: { maxAttempts: 5, initialDelay: '200ms', maxDelay: '3s' },
  async run(ctx, payment) {
    const response = await ctx.step('call-payment-api', async ({ attempt }) => {
      const status = payment.declined ? 402 : attempt <= (payment.failFirst ?? 2) ? 503 : 200;
      if (status === 402) throw new NonRetryableError(`payment ${payment.paymentId} was declined (HTTP 402)`);
      if (status !== 200) throw new Error(`payment API unavailable (HTTP ${status}) on attempt ${attempt}`);
      return { status, confirmation: `conf-${payment.paymentId}`, attempts: attempt };
    });
    return { paymentId: payment.paymentId, confirmation: response.confirmation, attempts: response.attempts };
  },
});
