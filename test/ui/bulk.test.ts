import { bulkBlocker, bulkBody, bulkNothing, bulkOutcome, bulkQuestion, bulkStatuses } from '../../src/ui/bulk';
import type { ListFilter } from '../../src/ui/routes';

const page = { offset: 40, limit: 20 };

describe('bulk actions from the list filter', () => {
  it('names the count and the statuses the action takes', () => {
    const eu = { ...page, tags: ['eu'] };
    expect(bulkQuestion('cancel', eu, 37)).toBe('Cancel 37 pending, running or waiting executions matching this filter?');
    expect(bulkQuestion('retry', eu, 3)).toBe('Retry 3 failed or cancelled executions matching this filter?');
    expect(bulkQuestion('retry', { ...page, status: 'failed' }, 1)).toBe('Retry 1 failed execution matching this filter?');
    expect(bulkQuestion('retry', eu, 12_000)).toBe('Retry the oldest 10000 of the 12000 failed or cancelled executions matching this filter?');
    expect(bulkQuestion('cancel', page, 5)).toBe('Cancel 5 pending, running or waiting executions, with no filter set?');
    expect(bulkNothing('cancel', { ...page, status: 'waiting' })).toBe('No waiting execution matches this filter: nothing to cancel.');
  });

  it("counts only the statuses the action applies to: the filter's own, or all of them", () => {
    expect(bulkStatuses('cancel', page)).toEqual(['pending', 'running', 'waiting']);
    expect(bulkStatuses('retry', page)).toEqual(['failed', 'cancelled']);
    expect(bulkStatuses('retry', { ...page, status: 'cancelled' })).toEqual(['cancelled']);
    expect(bulkStatuses('retry', { ...page, status: 'running' })).toEqual([]);
  });

  it('refuses filters the bulk endpoints cannot express, and statuses the action does not apply to', () => {
    expect(bulkBlocker('cancel', page)).toBeNull();
    expect(bulkBlocker('retry', { ...page, tags: ['eu'], task: 't', createdAfter: '2024-10-30T00:00:00Z' })).toBeNull();
    expect(bulkBlocker('retry', { ...page, parent: '0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10' })).toMatch(/children/);
    expect(bulkBlocker('cancel', { ...page, idempotencyKey: 'k' })).toMatch(/idempotency key/);
    expect(bulkBlocker('retry', { ...page, status: 'completed' })).toBe('Only failed or cancelled executions can be retried.');
    expect(bulkBlocker('cancel', { ...page, status: 'failed' })).toBe('Only pending, running or waiting executions can be cancelled.');
  });

  it('sends the filter without paging, limited to the count confirmed', () => {
    const filter: ListFilter = { ...page, task: 'approve-order', status: 'failed', tags: ['eu', 'vip'], createdAfter: '2024-10-30T00:00:00Z', createdBefore: '2024-10-31T00:00:00Z' };
    expect(bulkBody(filter, 37)).toEqual({
      task: 'approve-order',
      status: 'failed',
      tag: ['eu', 'vip'],
      created_after: '2024-10-30T00:00:00Z',
      created_before: '2024-10-31T00:00:00Z',
      limit: 37,
    });
    expect(bulkBody(page, 50_000)).toEqual({ limit: 10_000 });
  });

  it('reports what changed, and why fewer than matched', () => {
    expect(bulkOutcome('retry', { matched: 3, changed: 3 })).toBe('Retried 3 of 3 matching executions.');
    expect(bulkOutcome('cancel', { matched: 2, changed: 1 })).toBe('Cancelled 1 of 2 matching executions. The others had moved on meanwhile.');
  });
});
