// Durable semantics, part 2 (issue #33): one test per row of the table, against a real worker
// and API server.
import { defineTask } from '../../src/index';
import type { Worker } from '../../src/engine/worker';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

let api: TestApi;
let worker: Worker;
const counts = new Map<string, number>();
const bump = (key: string) => {
  const n = (counts.get(key) ?? 0) + 1;
  counts.set(key, n);
  return n;
};

const hangsOnce = defineTask({
  name: 'ds2-hangs-once',
  timeout: 600,
  async run(ctx) {
    return ctx.step('work', async () => {
      // The first run outlives the timeout; the retried one takes a while, well within a fresh one.
      if (bump(`hang:${ctx.executionId}`) === 1) return new Promise(() => undefined);
      await new Promise((r) => setTimeout(r, 300));
      return 'done';
    });
  },
});

const tasks = [hangsOnce];

beforeAll(async () => {
  api = await startTestApi();
  worker = await startWorker(api.t, tasks as never, { pollIntervalMs: 100, shutdownGraceMs: 200 });
});
afterAll(async () => {
  await worker.stop();
  await api.close();
});

async function run(task: string, data: Record<string, unknown> = {}) {
  const { execution_id } = await api.client.schedule(task, data);
  return execution_id;
}

const finished = (id: string, deadlineMs = 15_000) => api.client.wait(id, { deadlineMs });

describe('retry after a timeout', () => {
  test("a retry of an execution that failed on its task's timeout gets a fresh timeout", async () => {
    const id = await run(hangsOnce.name);
    expect(await finished(id)).toMatchObject({ status: 'failed', error: { type: 'ExecutionTimeoutError' } });
    const before = await api.client.get(id);
    expect(await api.client.retry(id)).toMatchObject({ execution_id: id });
    const done = await waitUntil(async () => {
      const e = await api.client.get(id);
      return e.status === 'completed' || e.status === 'failed' ? e : undefined;
    }, 'the retried execution to finish');
    expect(done).toMatchObject({ status: 'completed', output: 'done' });
    expect(counts.get(`hang:${id}`)).toBe(2);
    // started_at still tells when the execution first ran.
    expect(done.started_at).toBe(before.started_at);
  });
});
