// Claims and schedule → start on a table that has grown for a year, against an empty one, and with
// retention deleting while it runs (issue 23, item 3). The table is the list extra's: millions of
// executions, almost all finished, filled by fillHistory.
import pg from 'pg';
import type { Db } from '../../src/store/db';
import { RetentionSweeper } from '../../src/engine/retention';
import { createLogger } from '../../src/logger';
import { drain, loadAdapter, percentile, s4, type ExistingDatabase } from './scenarios';
import type { ExtraResult } from './extra-result';

/** Fill rate of created_at: one execution per 10 ms, so 10M rows span about 28 hours. */
const ROWS_PER_SECOND = 100;
const CHUNK = 1_000_000;

/**
 * `rows` executions of 20 tasks, one in a thousand waiting for an event and the rest finished
 * (completed, failed, cancelled), half of them tagged and a third with an idempotency key, written
 * in chunks so no one statement holds millions of rows in its trigger's transition table; then
 * VACUUM ANALYZE, as autovacuum would have by the time a table is this old.
 */
export async function fillHistory(db: Db, rows: number, progress?: (done: number) => void): Promise<void> {
  for (let from = 1; from <= rows; from += CHUNK) {
    const to = Math.min(rows, from + CHUNK - 1);
    await db.raw(
      `INSERT INTO stepwise.executions (id, task, status, data, created_at, completed_at, due_at, attempt, tags, idempotency_key)
       SELECT gen_random_uuid(), 'task-' || (g % 20), s, jsonb_build_object('n', g), ts, CASE WHEN s <> 'waiting' THEN ts END, NULL, 1,
              CASE WHEN g % 2 = 0 THEN ARRAY['tenant-' || (g / 2 % 5000), 'region-' || (g / 2 % 5)] END,
              CASE WHEN g % 3 = 0 THEN 'order-' || g END
         FROM generate_series(?::bigint, ?::bigint) g,
              LATERAL (SELECT now() - make_interval(secs => (? - g) / ${ROWS_PER_SECOND}.0) AS ts,
                              CASE WHEN g % 1000 = 0 THEN 'waiting'
                                   ELSE (ARRAY['completed','completed','completed','completed','failed','cancelled'])[1 + g % 6] END AS s) x`,
      [from, to, rows],
    );
    progress?.(to);
  }
  await db.raw('VACUUM ANALYZE stepwise.executions');
}

const log = createLogger({ level: 'warn', pretty: false });

const ratio = (a: number | null | undefined, b: number | null | undefined) => (a != null && b ? Math.round((a / b) * 100) / 100 : null);

/** What the adapter counts as active and completed in the big table now (drains add to it). */
async function existing(url: string): Promise<ExistingDatabase> {
  const adapter = await loadAdapter('stepwise');
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return { url, activeBefore: await adapter.remaining(c), completedBefore: await adapter.succeeded(c, 0) };
  } finally {
    await c.end();
  }
}

/**
 * S2 (drain 10,000 no-op executions) and S4 (schedule → start over HTTP) on an empty database and on
 * the big one, `reps` times each, interleaved; then S4 on the big one while a retention sweep deletes
 * its oldest tenth (the sweep starts as S4 sets up, and stops when it ends). Medians; the ratios are big / empty, and S4 under retention / S4 on the big table.
 */
export async function loadOnBigTable(env: NodeJS.ProcessEnv, db: Db, url: string, rows: number, reps: number): Promise<ExtraResult> {
  const o = { env, spec: 'stepwise' };
  const adapter = await loadAdapter('stepwise');
  const s2 = { empty: [] as number[], big: [] as number[] };
  const start = { empty: [] as number[][], big: [] as number[][], retention: [] as number[][] };
  const swept: number[] = [];
  const [{ first }] = (await db.raw('SELECT min(created_at) AS first FROM stepwise.executions')).rows as Array<{ first: Date }>;
  // The oldest tenth of the history is past retention.
  const cutoff = new Date(first.getTime() + (rows / ROWS_PER_SECOND / 10) * 1000);
  for (let r = 0; r < reps; r++) {
    s2.empty.push((await drain(o, adapter, 10000, 'noop')).completed_s as number);
    s2.big.push((await drain(o, adapter, 10000, 'noop', false, await existing(url))).completed_s as number);
    const e = await s4(o);
    start.empty.push([e.start_p50_ms ?? NaN, e.start_p99_ms ?? NaN]);
    const b = await s4(o, await existing(url));
    start.big.push([b.start_p50_ms ?? NaN, b.start_p99_ms ?? NaN]);
    // The sweeper as every worker runs it, paced, from the moment S4's worker is up until S4 ends.
    let deleted = 0;
    const sweeper = new RetentionSweeper({ db, log, keepFinishedMs: Date.now() - cutoff.getTime(), onDeleted: (n) => (deleted += n) });
    void sweeper.sweep();
    const w = await s4(o, await existing(url)).finally(() => sweeper.stop());
    swept.push(deleted);
    start.retention.push([w.start_p50_ms ?? NaN, w.start_p99_ms ?? NaN]);
  }
  const med = (xs: number[]) => percentile(xs, 50) ?? NaN;
  const at = (xs: number[][], i: number) => Math.round(med(xs.map((x) => x[i])) * 100) / 100;
  const values = {
    rows,
    s2_empty_per_s: Math.round(med(s2.empty)),
    s2_big_per_s: Math.round(med(s2.big)),
    s2_big_vs_empty: ratio(med(s2.big), med(s2.empty)) ?? NaN,
    s4_empty_p50_ms: at(start.empty, 0),
    s4_empty_p99_ms: at(start.empty, 1),
    s4_big_p50_ms: at(start.big, 0),
    s4_big_p99_ms: at(start.big, 1),
    s4_big_vs_empty_p99: ratio(at(start.big, 1), at(start.empty, 1)) ?? NaN,
    s4_retention_p50_ms: at(start.retention, 0),
    s4_retention_p99_ms: at(start.retention, 1),
    s4_retention_vs_big_p99: ratio(at(start.retention, 1), at(start.big, 1)) ?? NaN,
    swept_during_s4: Math.round(med(swept)),
  };
  return {
    label: `claims and S4 at ${rows.toLocaleString('en')} executions`,
    summary:
      `S2 ${values.s2_big_per_s}/s against ${values.s2_empty_per_s}/s empty (×${values.s2_big_vs_empty}); ` +
      `S4 p50/p99 ${values.s4_big_p50_ms}/${values.s4_big_p99_ms} ms against ${values.s4_empty_p50_ms}/${values.s4_empty_p99_ms} ms empty (p99 ×${values.s4_big_vs_empty_p99}); ` +
      `with retention deleting (${values.swept_during_s4.toLocaleString('en')} rows during the run) ${values.s4_retention_p50_ms}/${values.s4_retention_p99_ms} ms (p99 ×${values.s4_retention_vs_big_p99})`,
    values,
    runs: { s2, start, swept },
  };
}
