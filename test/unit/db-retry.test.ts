import { retryWhileUnavailable } from '../../src/engine/db-retry';
import { StoreUnavailableError } from '../../src/engine/errors';

/** An fn that throws `errors` in turn, then returns 'ok'; counts its calls. */
function failing(...errors: object[]) {
  const fn = async () => {
    fn.calls += 1;
    const err = errors.shift();
    if (err) throw Object.assign(new Error('from the database'), err);
    return 'ok';
  };
  fn.calls = 0;
  return fn;
}

describe('retryWhileUnavailable', () => {
  test('runs the statement again after a deadlock or a serialization failure', async () => {
    const fn = failing({ code: '40P01' }, { code: '40001' });
    await expect(retryWhileUnavailable(fn, Date.now() + 10_000)).resolves.toBe('ok');
    expect(fn.calls).toBe(3);
  });

  test('runs it again while the database is unreachable, and gives up at the deadline', async () => {
    const fn = failing({ code: '57P01' });
    await expect(retryWhileUnavailable(fn, Date.now() + 10_000)).resolves.toBe('ok');
    expect(fn.calls).toBe(2);
    await expect(retryWhileUnavailable(failing({ code: '08006' }), Date.now())).rejects.toBeInstanceOf(StoreUnavailableError);
  });

  test('throws any other error at once', async () => {
    const fn = failing({ code: '23505' });
    await expect(retryWhileUnavailable(fn, Date.now() + 10_000)).rejects.toMatchObject({ code: '23505' });
    expect(fn.calls).toBe(1);
  });
});
