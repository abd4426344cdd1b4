import { defineTask, Type } from 'stepwise-workflows';

export const syncTenant = defineTask({
  name: 'sync-tenant',
  data: Type.Object({ tenantId: Type.String(), since: Type.String() }),
  // At most 2 running at once per tenant; tenants take turns, so one tenant's backlog never starves another's.
  concurrency: { limit: 2, key: '/tenantId' },
  // At most 100 starts in any minute per tenant (a partner API's quota).
  rateLimit: { limit: 100, period: '1m', key: '/tenantId' },
  async run(ctx, data) {
    return ctx.step('sync', () => ({ tenant: data.tenantId, since: data.since }));
  },
});

export const reindexUser = defineTask({
  name: 'reindex-user',
  data: Type.Object({ userId: Type.String() }),
  // Ten edits in a burst make one run, with the last data, 5 s after the last edit.
  debounce: { period: '5s', key: '/userId' },
  async run(ctx, data) {
    return { reindexed: data.userId };
  },
});
