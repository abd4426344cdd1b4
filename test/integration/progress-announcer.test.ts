// Progress announcements (steps recorded, sleeps ended): sent apart from the step writes, in
// notifications of at most 200 ids, and a burst of steps costs one announcement.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { ProgressAnnouncer } from '../../src/engine/progress-announcer';
import { createLogger } from '../../src/logger';
import { CHANNEL_PROGRESS } from '../../src/store/channels';
import { progressAnnouncement } from '../../src/store/progress';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';

let t: TestDatabase;
let listener: pg.Client;
const heard: string[][] = [];

beforeAll(async () => {
  t = await createTestDatabase();
  listener = new pg.Client({ connectionString: t.url });
  await listener.connect();
  listener.on('notification', (msg) => void (msg.channel === CHANNEL_PROGRESS && heard.push((msg.payload ?? '').split(','))));
  await listener.query(`LISTEN ${CHANNEL_PROGRESS}`);
});
afterAll(async () => {
  await listener.end();
  await t.drop();
});

beforeEach(() => void heard.splice(0));

test('an announcement sends the ids 200 to a notification, and leaves its connection as it was', async () => {
  const sender = new pg.Client({ connectionString: t.url });
  await sender.connect();
  try {
    const ids = Array.from({ length: 450 }, () => randomUUID());
    await sender.query(progressAnnouncement(ids));
    await waitUntil(() => heard.length === 3, 'three notifications');
    expect(heard.map((h) => h.length)).toEqual([200, 200, 50]);
    expect(heard.flat()).toEqual(ids);
    // Outside any transaction again, with the default commit setting (SET LOCAL ended with it).
    const { rows } = await sender.query("SELECT current_setting('synchronous_commit') AS s, now() = statement_timestamp() AS outside");
    expect(rows[0]).toEqual({ s: 'on', outside: true });
  } finally {
    await sender.end();
  }
});

test('the announcer gathers a burst of steps into one announcement, and sends later ones after it', async () => {
  const announcer = new ProgressAnnouncer({ run: async (sql) => void (await t.db.raw(sql)), log: createLogger({ level: 'silent' }), intervalMs: 100 });
  announcer.streamsOpen(() => []);
  const a = randomUUID();
  const b = randomUUID();
  for (let i = 0; i < 50; i++) announcer.add(i % 2 ? a : b);
  await waitUntil(() => heard.length === 1, 'the first announcement');
  expect(new Set(heard[0])).toEqual(new Set([a, b]));
  announcer.add(a);
  await waitUntil(() => heard.length === 2, 'the second announcement');
  expect(heard[1]).toEqual([a]);
  announcer.stop();
  announcer.add(b);
  await new Promise((r) => setTimeout(r, 250));
  expect(heard).toHaveLength(2);
});

test('the announcer is silent until it hears of streams and once its window has shut; on hearing of them, it announces the running executions at once', async () => {
  let clock = 1_000_000;
  const announcer = new ProgressAnnouncer({ run: async (sql) => void (await t.db.raw(sql)), log: createLogger({ level: 'silent' }), intervalMs: 10, windowMs: 15_000, now: () => clock });
  announcer.add(randomUUID());
  await new Promise((r) => setTimeout(r, 50));
  expect(heard).toHaveLength(0);
  announcer.streamsOpen(() => []);
  const early = randomUUID();
  announcer.add(early);
  await waitUntil(() => heard.length === 1, 'an announcement within the window');
  expect(heard[0]).toEqual([early]);
  clock += 15_001;
  const unheard = randomUUID();
  announcer.add(unheard);
  await new Promise((r) => setTimeout(r, 50));
  expect(heard).toHaveLength(1);
  // Streams: what runs now is announced, since its steps while shut were not; later steps as they come.
  const running = [unheard, randomUUID()];
  announcer.streamsOpen(() => running);
  await waitUntil(() => heard.length === 2, 'the running executions announced');
  expect(new Set(heard[1])).toEqual(new Set(running));
  clock += 14_000;
  const later = randomUUID();
  announcer.add(later);
  await waitUntil(() => heard.length === 3, 'a step while the window is open');
  expect(heard[2]).toEqual([later]);
  // Heard again while open: the window is extended, nothing re-announced.
  announcer.streamsOpen(() => running);
  clock += 14_000;
  announcer.add(later);
  await waitUntil(() => heard.length === 4, 'a step within the extended window');
  expect(heard[3]).toEqual([later]);
  announcer.stop();
});
