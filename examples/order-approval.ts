import { defineTask, NonRetryableError, Type } from 'stepwise-workflows';

/**
 * An order waits for a human decision. It reserves stock, then waits up to the given time (default
 * 1 hour) for an `approval` event; without one it releases the stock and ends as not approved.
 *
 *   curl -X POST localhost:8080/api/v1/executions -H 'content-type: application/json' \
 *     -d '{"task":"order-approval","data":{"orderId":"A-1001","amountCents":4999}}'
 *   curl -X POST localhost:8080/api/v1/events/<id>/approval -H 'content-type: application/json' \
 *     -d '{"approved":true,"approver":"dana"}'
 */
export const orderApproval = defineTask({
  name: 'order-approval',
  data: Type.Object(
    {
      orderId: Type.String({ minLength: 1, maxLength: 64 }),
      amountCents: Type.Integer({ minimum: 1 }),
      approvalTimeout: Type.Optional(Type.String({ description: "how long to wait for the decision, e.g. '30s', '1h', '7d'" })),
    },
    { additionalProperties: false },
  ),
  events: {
    approval: Type.Object({ approved: Type.Boolean(), approver: Type.Optional(Type.String()) }, { additionalProperties: false }),
  },
  retry: { maxAttempts: 3, initialDelay: '500ms', maxDelay: '5s' },
  async run(ctx, order) {
    if (order.amountCents > 10_000_000) throw new NonRetryableError('orders above 100,000.00 need a manual process');
    const reservation = await ctx.step('reserve-stock', () => ({ reservationId: `res-${order.orderId}`, reservedAt: new Date().toISOString() }));
    let approved = false;
    let approver: string | undefined;
    try {
      const decision = await ctx.waitForEvent('approval', { timeout: order.approvalTimeout ?? '1h' });
      approved = decision.approved;
      approver = decision.approver;
    } catch (err) {
      if ((err as Error).name !== 'EventTimeoutError') throw err;
      ctx.log.info({ orderId: order.orderId }, 'approval timed out');
    }
    if (!approved) {
      await ctx.step('release-stock', () => ({ released: reservation.reservationId }));
      return { orderId: order.orderId, approved: false, approver: approver ?? null };
    }
    const charge = await ctx.step('charge-card', () => ({ chargeId: `ch-${order.orderId}`, amountCents: order.amountCents }));
    return { orderId: order.orderId, approved: true, approver: approver ?? null, chargeId: charge.chargeId };
  },
});
