import { defineTask, Type } from 'stepwise-workflows';

export const fulfilOrder = defineTask({
  name: 'fulfil-order',
  version: '2', // was '1': the order is now reserved before the approval wait
  data: Type.Object({ orderId: Type.String() }),
  events: { approval: Type.Object({ approved: Type.Boolean() }) },
  async run(ctx, data) {
    await ctx.step('reserve', () => ({ reserved: data.orderId }));
    const approval = await ctx.waitForEvent('approval', { timeout: '7d' });
    return ctx.step('ship', () => ({ shipped: data.orderId, approved: approval.approved }));
  },
});
