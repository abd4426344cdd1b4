// The API's cache of task schemas: a worker's re-registration applies from the next request, without
// a read of stepwise.tasks on every request.
import { EventEmitter } from 'node:events';
import { startTestApi, type TestApi } from '../helpers/api-server';
import { registerTask, uniqueTask } from '../helpers/simulated-worker';
import { waitUntil } from '../helpers/wait-until';
import { TaskSchemaCache } from '../../src/store/task-schemas';
import { CHANNEL_TASKS } from '../../src/store/channels';

let api: TestApi;
const numberSchema = { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] };
const stringSchema = { type: 'object', properties: { n: { type: 'string' } }, required: ['n'] };

beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

/** Stands in for the LISTEN connection, so a test decides what the cache hears. */
class FakeFeed extends EventEmitter {
  isConnected = true;
}

/** A cache following a fake feed, with a clock the test sets: plain ttl 1 s, 60 s while connected. */
function followingCache() {
  const clock = { now: 0 };
  const feed = new FakeFeed();
  const cache = new TaskSchemaCache(api.db, { ttlMs: 1000, listeningTtlMs: 60_000, now: () => clock.now });
  const unfollow = cache.follow(feed);
  return { clock, feed, cache, unfollow };
}

const accepts = async (cache: TaskSchemaCache, task: string, data: unknown) => (await cache.getTask(task)).validateData?.(data) ?? true;

describe('task schemas in the API', () => {
  test('a worker re-registering a task with a new schema applies from the next requests, well before the cache would expire it', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task, numberSchema);
    await api.client.schedule(task, { n: 1 });
    await expect(api.client.schedule(task, { n: 'one' })).rejects.toMatchObject({ status: 422, code: 'invalid_data' });
    // Cached a moment ago: a cache that only expired entries would keep the old schema for seconds more.
    await registerTask(api.db, task, stringSchema);
    const started = Date.now();
    await waitUntil(async () => (await api.client.schedule(task, { n: 'one' }).catch(() => undefined))?.status === 'pending', 'the new schema', 1000, 10);
    expect(Date.now() - started).toBeLessThan(1000);
    await expect(api.client.schedule(task, { n: 1 })).rejects.toMatchObject({ status: 422, code: 'invalid_data' });
  });

  test('a connected feed keeps entries past the plain ttl (no read per request); a notification drops one', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task, numberSchema);
    const { clock, feed, cache } = followingCache();
    expect(await accepts(cache, task, { n: 1 })).toBe(true);
    await registerTask(api.db, task, stringSchema); // unheard: the fake feed says nothing
    clock.now = 30_000;
    expect(await accepts(cache, task, { n: 1 })).toBe(true);
    feed.emit('notification', CHANNEL_TASKS, task);
    expect(await accepts(cache, task, { n: 1 })).toBe(false);
  });

  test('while the feed is down entries last the plain ttl, and a reconnect drops them all', async () => {
    const [a, b] = [uniqueTask('a'), uniqueTask('b')];
    await registerTask(api.db, a, numberSchema);
    await registerTask(api.db, b, numberSchema);
    const { clock, feed, cache } = followingCache();
    expect(await accepts(cache, a, { n: 1 })).toBe(true);
    expect(await accepts(cache, b, { n: 1 })).toBe(true);
    feed.isConnected = false;
    feed.emit('disconnected');
    await registerTask(api.db, a, stringSchema);
    expect(await accepts(cache, a, { n: 1 })).toBe(false); // dropped at the disconnect
    await registerTask(api.db, a, numberSchema);
    clock.now = 500;
    expect(await accepts(cache, a, { n: 1 })).toBe(false); // within the plain ttl
    clock.now = 1500;
    expect(await accepts(cache, a, { n: 1 })).toBe(true); // past it: read again
    await registerTask(api.db, b, stringSchema);
    feed.isConnected = true;
    feed.emit('connected');
    expect(await accepts(cache, b, { n: 1 })).toBe(false);
  });

  test('a read that an invalidation overtakes answers its caller but is not cached', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task, numberSchema);
    const feed = new FakeFeed();
    const cache = new TaskSchemaCache(api.db);
    cache.follow(feed);
    const reading = cache.getTask(task);
    feed.emit('notification', CHANNEL_TASKS, task);
    await registerTask(api.db, task, stringSchema);
    expect((await reading).validateData?.({ n: 1 })).toBe(true);
    expect(await accepts(cache, task, { n: 1 })).toBe(false);
  });

  test('an unfollowed cache falls back to the plain ttl', async () => {
    const task = uniqueTask();
    await registerTask(api.db, task, numberSchema);
    const { clock, feed, cache, unfollow } = followingCache();
    expect(await accepts(cache, task, { n: 1 })).toBe(true);
    unfollow();
    expect(feed.listenerCount('notification')).toBe(0);
    expect(await accepts(cache, task, { n: 1 })).toBe(true);
    await registerTask(api.db, task, stringSchema);
    clock.now = 500;
    expect(await accepts(cache, task, { n: 1 })).toBe(true);
    clock.now = 1500;
    expect(await accepts(cache, task, { n: 1 })).toBe(false);
  });
});
