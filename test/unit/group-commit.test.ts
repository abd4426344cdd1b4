import { GroupCommitter, landedFlags } from '../../src/group-commit';

describe('group commit', () => {
  test('writes submitted during a flush share the next flush', async () => {
    const flushes: number[][] = [];
    let release!: () => void;
    const first = new Promise<void>((r) => (release = r));
    const gc = new GroupCommitter<number, boolean>(
      landedFlags(async (items: number[]) => {
        flushes.push(items);
        if (flushes.length === 1) await first;
        return new Set(items.filter((i) => i !== 3));
      }, (i) => i),
      () => false,
      { maxInFlight: 1 },
    );
    const p1 = gc.submit(1);
    await new Promise((r) => setImmediate(r));
    const rest = [2, 3, 4].map((i) => gc.submit(i));
    release();
    expect(await p1).toBe(true);
    expect(await Promise.all(rest)).toEqual([true, false, true]);
    expect(flushes).toEqual([[1], [2, 3, 4]]);
  });

  test('writes submitted in the same event-loop turn share one flush', async () => {
    const flushes: number[][] = [];
    const gc = new GroupCommitter<number, number>(async (items) => {
      flushes.push(items);
      return items;
    });
    await Promise.all([1, 2, 3].map((i) => gc.submit(i)));
    await gc.submit(4);
    expect(flushes).toEqual([[1, 2, 3], [4]]);
  });

  test('a linger holds a batch that is not full, so that writes submitted meanwhile share it', async () => {
    const flushes: number[][] = [];
    let linger = 50;
    const gc = new GroupCommitter<number, number>(
      async (items) => {
        flushes.push(items);
        return items;
      },
      () => false,
      { maxBatch: 3, linger: () => linger },
    );
    const first = gc.submit(1);
    await new Promise((r) => setTimeout(r, 10));
    // A full batch (three) goes out without waiting; the fourth waits for the next.
    await Promise.all([first, ...[2, 3, 4].map((i) => gc.submit(i))]);
    linger = 0;
    await gc.submit(5);
    expect(flushes).toEqual([[1, 2, 3], [4], [5]]);
  });

  test('a batch that fails for one bad item is retried item by item', async () => {
    const gc = new GroupCommitter<number, number>(
      async (items) => {
        if (items.includes(13)) throw new Error('bad item');
        return items.map((i) => i * 2);
      },
      () => false,
      { maxInFlight: 1 },
    );
    // 1 flushes alone; 13 and 2 share the next batch, which fails and is split.
    const p1 = gc.submit(1);
    await new Promise((r) => setImmediate(r));
    const results = await Promise.allSettled([p1, gc.submit(13), gc.submit(2)]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[2] as PromiseFulfilledResult<number>).value).toBe(4);
  });

  test('with two flushes in flight, a slow flush does not hold back the next one', async () => {
    let releaseFirst!: () => void;
    const first = new Promise<void>((r) => (releaseFirst = r));
    const order: number[] = [];
    const gc = new GroupCommitter<number, boolean>(async (items) => {
      if (items.includes(1)) await first;
      order.push(...items);
      return items.map(() => true);
    });
    const p1 = gc.submit(1);
    await new Promise((r) => setImmediate(r));
    await expect(gc.submit(2)).resolves.toBe(true);
    expect(order).toEqual([2]);
    releaseFirst();
    await expect(p1).resolves.toBe(true);
    await gc.idle();
  });

  test('a transient failure rejects the whole batch without splitting', async () => {
    let calls = 0;
    const gc = new GroupCommitter<number, number>(
      async () => {
        calls += 1;
        throw Object.assign(new Error('down'), { code: 'ECONNREFUSED' });
      },
      () => true,
    );
    const results = await Promise.allSettled([gc.submit(1), gc.submit(2)]);
    expect(results.every((r) => r.status === 'rejected')).toBe(true);
    expect(calls).toBeLessThanOrEqual(2);
  });
});
