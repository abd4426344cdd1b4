// Property test: generated bad requests against every operation never get a 5xx, always the
// envelope on errors, and only statuses and bodies openapi.yaml lists for that operation.
import fc from 'fast-check';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { checkFuzzResponse, fuzzRequests, sendFuzzRequest, type FuzzRequest } from '../helpers/fuzz-requests';
import { createExecutionIn, registerTask } from '../helpers/simulated-worker';
import { getSpec } from '../../src/api/spec';

const TOKEN = 'fuzz-token';
let api: TestApi;
let knownIds: string[] = [];

beforeAll(async () => {
  api = await startTestApi({ tokens: [TOKEN] });
  const client = api.clientWith(TOKEN);
  // The spec's own example task, so valid samples get past task_not_registered.
  await registerTask(api.db, 'approve-order', { type: 'object', properties: { orderId: { type: 'string' } }, required: ['orderId'] }, {
    approval: { type: 'object', properties: { approved: { type: 'boolean' } }, required: ['approved'] },
  });
  for (const state of ['pending', 'running', 'waiting', 'waiting', 'completed', 'failed', 'cancelled'] as const) {
    knownIds.push((await createExecutionIn(client, api.db, state)).id);
  }
});
afterAll(async () => {
  await api.close();
});

test('generated bad requests to every operation never get a 5xx, always the envelope, and only what the spec lists', async () => {
  const seen = new Map<string, Set<number>>();
  await fc.assert(
    fc.asyncProperty(fuzzRequests({ spec: getSpec(), knownIds, token: TOKEN }), async (req: FuzzRequest) => {
      const res = await sendFuzzRequest(api.api.url, req, 200);
      if (!res) return; // a valid long-poll still waiting: nothing wrong
      const problems = checkFuzzResponse(req, res);
      if (!seen.has(req.operationId)) seen.set(req.operationId, new Set());
      seen.get(req.operationId)?.add(res.status);
      if (problems.length > 0) throw new Error(`${req.method} ${req.path.slice(0, 200)} → ${res.status}: ${problems.join('; ')}`);
    }),
    // Seeded so a failure reproduces; FUZZ_SEED / FUZZ_RUNS explore further without editing the test.
    { seed: Number(process.env.FUZZ_SEED ?? 20241030), numRuns: Number(process.env.FUZZ_RUNS ?? 600), endOnFailure: true },
  );
  // The run reached every operation and more than one kind of answer: a fuzzer stuck on 401s proves nothing.
  expect([...seen.keys()].sort()).toEqual([...getSpec().operations.keys()].sort());
  const statuses = new Set([...seen.values()].flatMap((s) => [...s]));
  for (const status of [200, 201, 400, 401, 404, 413, 415, 422]) expect(statuses).toContain(status);
  // knownIds is read lazily by the generator; keep the reference alive for clarity.
  knownIds = [...knownIds];
});
