import { parseRoute, routeHref, withFilter } from '../../src/ui/routes';

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
    ]) {
      expect(routeHref(parseRoute(hash))).toBe(hash);
    }
  });

  it('goes back to the first page when a filter changes', () => {
    const route = withFilter({ offset: 60, limit: 20 }, { task: 'x' });
    expect(routeHref(route)).toBe('#/executions?task=x');
  });
});
