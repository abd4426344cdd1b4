import { isFiltered, looksLikeExecutionId, parseRoute, parseTags, routeHref, toListQuery, withFilter } from '../../src/ui/routes';

describe('dashboard routes', () => {
  it('reads the list filter from the hash and ignores unknown or out-of-range values', () => {
    expect(parseRoute('#/executions?status=waiting&task=approve-order&offset=40&limit=50')).toEqual({
      page: 'executions',
      filter: { status: 'waiting', task: 'approve-order', offset: 40, limit: 50 },
    });
    expect(parseRoute('#/executions?status=bogus&offset=-3&limit=9999')).toEqual({
      page: 'executions',
      filter: { status: undefined, task: undefined, offset: 0, limit: 500 },
    });
    expect(parseRoute('')).toEqual({ page: 'executions', filter: { status: undefined, task: undefined, offset: 0, limit: 20 } });
  });

  it('round-trips execution, task and worker pages', () => {
    for (const hash of [
      '#/executions/0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10',
      '#/tasks',
      '#/workers',
      '#/executions?status=failed&offset=20',
      '#/executions?parent=0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10&limit=100',
      '#/executions?status=failed&tag=eu&tag=vip&created_after=2024-10-30T00%3A00%3A00Z&created_before=2024-10-31T12%3A30%3A00.250Z',
      '#/executions?idempotency_key=order-ord_123+approval%2Fv2',
    ]) {
      expect(routeHref(parseRoute(hash))).toBe(hash);
    }
  });

  it('goes back to the first page when a filter changes', () => {
    const route = withFilter({ offset: 60, limit: 20 }, { task: 'x' });
    expect(routeHref(route)).toBe('#/executions?task=x');
  });

  it('reads tags repeated or comma-separated, dropping blanks, repeats and tags the contract refuses', () => {
    const route = parseRoute('#/executions?tag=eu,+vip&tag=vip&tag=&tag=' + 'x'.repeat(65));
    expect(route).toMatchObject({ page: 'executions', filter: { tags: ['eu', 'vip'] } });
    expect(parseTags([' , '])).toBeUndefined();
    expect(parseTags([Array.from({ length: 25 }, (_, i) => `t${i}`).join(',')])).toHaveLength(20);
  });

  it('keeps only readable creation bounds, normalized to UTC', () => {
    const route = parseRoute('#/executions?created_after=2024-10-30T02:00:00%2B02:00&created_before=yesterday');
    expect(route).toMatchObject({ filter: { createdAfter: '2024-10-30T00:00:00Z', createdBefore: undefined } });
  });

  it('writes tags as repeated parameters and the search as idempotency_key', () => {
    const href = routeHref(withFilter({ offset: 40, limit: 20 }, { tags: ['eu', 'vip'], idempotencyKey: 'k 1' }));
    expect(href).toBe('#/executions?tag=eu&tag=vip&idempotency_key=k+1');
  });

  it('tells an execution id from an idempotency key by its shape', () => {
    expect(looksLikeExecutionId('0192D4C8-7a51-7cc2-9a1e-2f7f3c3b9d10 ')).toBe(true);
    expect(looksLikeExecutionId('order-ord_123-approval')).toBe(false);
    expect(looksLikeExecutionId('0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d1')).toBe(false);
  });

  it('turns the filter into the list query, and knows when anything filters', () => {
    const filter = { status: 'failed' as const, tags: ['eu'], createdAfter: '2024-10-30T00:00:00Z', offset: 20, limit: 50 };
    expect(toListQuery(filter)).toEqual({
      status: 'failed',
      task: undefined,
      parent_execution_id: undefined,
      tag: ['eu'],
      idempotency_key: undefined,
      created_after: '2024-10-30T00:00:00Z',
      created_before: undefined,
      limit: 50,
      offset: 20,
      order: 'desc',
    });
    expect(isFiltered(filter)).toBe(true);
    expect(isFiltered({ offset: 20, limit: 50 })).toBe(false);
  });
});
