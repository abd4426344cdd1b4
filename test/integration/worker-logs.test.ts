// The worker's log lines as a log pipeline reads them: JSON with each key once.
import { LogCapture } from '../helpers/api-server';
import { createLogger } from '../../src/logger';
import { defineTask } from '../../src/engine/task';
import { getExecution, insertExecutions } from '../../src/store/executions';
import { upsertTasks } from '../../src/store/tasks';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';
import { startWorker } from '../helpers/worker';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

/** The top-level keys of one JSON object's text, in order, repeats included (JSON.parse keeps only the last). */
function topLevelKeys(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  let inString = false;
  let start = -1;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') {
        inString = false;
        if (depth === 1 && line[i + 1] === ':') keys.push(JSON.parse(line.slice(start, i + 1)) as string);
      }
    } else if (c === '"') {
      inString = true;
      start = i;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
  }
  return keys;
}

test('a retried step logs the execution attempt and the step attempt under two keys', async () => {
  let calls = 0;
  const flaky = defineTask({
    name: 'logs-flaky-step',
    run: async (ctx) =>
      ctx.step(
        'call',
        async () => {
          calls += 1;
          if (calls === 1) throw new Error('first call fails');
          return 'ok';
        },
        { retry: { maxAttempts: 2, initialDelay: 10 } },
      ),
  });
  const logs = new LogCapture();
  await upsertTasks(t.db, [{ name: flaky.name, dataSchema: null, eventSchemas: {}, retry: null }]);
  const worker = await startWorker(t, [flaky as never], { log: createLogger({ level: 'info', destination: logs }) });
  try {
    const [{ execution }] = await insertExecutions(t.db, [{ task: flaky.name, data: {} }]);
    await waitUntil(async () => ((await getExecution(t.db, execution.id))?.status === 'completed' ? true : undefined), 'the execution to complete');
  } finally {
    await worker.stop();
  }
  const retried = logs.lines.filter((l) => (JSON.parse(l) as { msg: string }).msg === 'step attempt failed; retrying');
  expect(retried).toHaveLength(1);
  expect(JSON.parse(retried[0])).toMatchObject({ step: 'call', attempt: 1, stepAttempt: 1 });
  for (const line of logs.lines) {
    const keys = topLevelKeys(line);
    expect(keys).toEqual([...new Set(keys)]);
  }
});
