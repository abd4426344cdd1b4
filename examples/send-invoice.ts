import { defineTask, Type } from 'stepwise-workflows';

export const sendInvoice = defineTask({
  name: 'send-invoice',
  data: Type.Object({ orderId: Type.String() }),
  async run(ctx, data) {
    await ctx.step('render', () => ({ pdf: `invoice-${data.orderId}.pdf` }));
    if (ctx.patched('check-vat-id')) {
      await ctx.step('check-vat-id', () => ({ valid: true }));
    }
    await ctx.sleep('grace-period', '1h');
    return ctx.step('send', () => ({ sent: data.orderId }));
  },
});
