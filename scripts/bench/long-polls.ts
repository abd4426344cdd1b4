// N concurrent long-polls (GET /executions/{id}/wait?timeout=300) on one `stepwise serve` process: the
// memory they hold, and, once every execution completes, that each is answered right.
//
// Memory is read twice. The RSS the moment all N are held (as the figure was first taken) includes
// whatever garbage the connections and the fallback re-reads (every waitPollIntervalMs) left behind,
// so it moves with the timing of V8's collections. Then the process collects its garbage (a preload,
// memory-probe.cjs, answers an IPC message; nothing in the product) and reports its RSS and V8 heap:
// those, less the same figures idle, are what the waiters keep alive, and the target is judged on them.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { Db } from '../../src/store/db';
import { defineTask } from '../../src/engine/task';
import { TaskRegistry } from '../../src/engine/registry';
import { insertExecutions } from '../../src/store/executions';
import { upsertTasks } from '../../src/store/tasks';
import { findFreePort } from '../../src/store/embedded';
import { stepwiseArgs } from './build';
import type { ExtraResult } from './extra-result';

type FreshDatabase = (env: NodeJS.ProcessEnv) => Promise<{ url: string; db: Db; drop(): Promise<void> }>;

const ROOT = path.join(__dirname, '..', '..');
/** Issue 23: 10,000 long-polls should cost one API process less than this above idle. */
const TARGET_MIB_PER_10K = 100;
const MiB = 1024 * 1024;

const round1 = (x: number) => Math.round(x * 10) / 10;

function rssBytes(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
}

/** V8's heap spaces after a collection: bytes live and bytes in RAM, by space name. */
type HeapSpaces = Record<string, { used: number; physical: number }>;
interface CollectedMemory extends NodeJS.MemoryUsage {
  /** RAM held by V8's heap, live or not (its young generation stays as large as the last burst made it). */
  heapPhysical: number;
  newSpacePhysical: number;
}

/** The child's memory after it collected its garbage (see memory-probe.cjs). */
function collectedMemory(child: ChildProcess): Promise<CollectedMemory> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no memory report from stepwise serve (is memory-probe.cjs preloaded?)')), 30000);
    const onMessage = (m: { memory?: NodeJS.MemoryUsage; spaces?: HeapSpaces }) => {
      if (!m.memory) return;
      clearTimeout(timer);
      child.off('message', onMessage);
      const spaces = Object.values(m.spaces ?? {});
      resolve({
        ...m.memory,
        heapPhysical: spaces.reduce((sum, space) => sum + space.physical, 0),
        newSpacePhysical: m.spaces?.new_space?.physical ?? 0,
      });
    };
    child.on('message', onMessage);
    child.send('memory');
  });
}

function httpJson(port: number, urlPath: string, agent?: http.Agent): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: urlPath, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          try {
            resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null });
          } catch (err) {
            reject(err);
          }
        });
      })
      .on('error', reject);
  });
}

async function longPollsHeld(port: number): Promise<number> {
  const res = await new Promise<string>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/metrics' }, (r) => {
        let s = '';
        r.on('data', (d: Buffer) => (s += d.toString()));
        r.on('end', () => resolve(s));
      })
      .on('error', reject);
  });
  return Number(/^stepwise_http_long_polls_waiting(?:\{[^}]*\})? (\d+)/m.exec(res)?.[1] ?? NaN);
}

/** N concurrent long-polls on one `stepwise serve` process: the memory they hold, and that each is answered right. */
export async function longPolls(env: NodeJS.ProcessEnv, n: number, freshDatabase: FreshDatabase): Promise<ExtraResult> {
  const t = await freshDatabase(env);
  await upsertTasks(t.db, new TaskRegistry([defineTask({ name: 'bench-poll', run: async () => null }) as never]).toRegistrations());
  const ids: string[] = [];
  for (let i = 0; i < n; i += 1000) {
    const batch = await insertExecutions(t.db, Array.from({ length: Math.min(1000, n - i) }, () => ({ task: 'bench-poll', data: null })));
    ids.push(...batch.map((b) => b.execution.id));
  }
  const port = await findFreePort();
  // The benchmark's build (STEPWISE_DIST), else the source through bin/stepwise.js.
  const args = env.STEPWISE_DIST ? stepwiseArgs(env.STEPWISE_DIST, ['serve']) : [path.join(ROOT, 'bin', 'stepwise.js'), 'serve'];
  const child = spawn(process.execPath, ['--expose-gc', '-r', path.join(__dirname, 'memory-probe.cjs'), ...args], {
    env: { ...process.env, DATABASE_URL: t.url, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pid = child.pid as number;
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  try {
    for (let i = 0; ; i++) {
      const ok = await httpJson(port, '/readyz').then((r) => r.status === 200, () => false);
      if (ok) break;
      if (i > 600) throw new Error('stepwise serve did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
    // A few answered long-polls first, so the code they run is loaded and compiled before "idle".
    for (const id of ids.slice(0, 20)) await httpJson(port, `/api/v1/executions/${id}/wait?timeout=0`, agent);
    const rssIdle = rssBytes(pid);
    const idle = await collectedMemory(child);
    let answered = 0;
    let correct = 0;
    let failed = 0;
    /** Why connections failed, by message (a handful of distinct ones at most). */
    const failures = new Map<string, number>();
    const polls: Promise<void>[] = [];
    // Clients connect in waves of 500, as real ones would, rather than overflowing the listen backlog.
    for (let i = 0; i < ids.length; i += 500) {
      for (const id of ids.slice(i, i + 500)) {
        polls.push(
          httpJson(port, `/api/v1/executions/${id}/wait?timeout=300`, agent).then(
            (r) => {
              answered += 1;
              const body = r.body as { execution_id?: string; status?: string; output?: unknown };
              if (r.status === 200 && body.execution_id === id && body.status === 'completed' && body.output === id) correct += 1;
            },
            (err: Error) => {
              failed += 1;
              const why = `${(err as NodeJS.ErrnoException).code ?? err.name}: ${err.message}`.slice(0, 200);
              failures.set(why, (failures.get(why) ?? 0) + 1);
            },
          ),
        );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    // Wait until the server holds every long-poll whose connection did not fail (its gauge), then measure.
    let held = NaN;
    for (let i = 0; ; i++) {
      held = await longPollsHeld(port);
      if (held >= n - failed || (Number.isNaN(held) && i > 100)) break;
      if (i > 1200) throw new Error(`only ${held} long-polls held (${failed} connections failed)`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const rssHeld = rssBytes(pid);
    const heldMemory = await collectedMemory(child);
    // Complete every execution (as a worker would), in batches of 200 with one NOTIFY each (8 kB payloads).
    const started = performance.now();
    for (let i = 0; i < ids.length; i += 200) {
      await t.db.raw(
        `WITH d AS (UPDATE stepwise.executions SET status = 'completed', output = to_jsonb(id::text), completed_at = now(), due_at = NULL
                     WHERE id = ANY(?::uuid[]) RETURNING id)
         SELECT pg_notify('stepwise_changed', string_agg(id::text, ',')) FROM d`,
        [ids.slice(i, i + 200)],
      );
    }
    await Promise.all(polls);
    const allAnsweredMs = Math.round(performance.now() - started);
    const rssAfter = rssBytes(pid);
    const waiters = Number.isNaN(held) ? n - failed : held;
    const per10k = (bytes: number) => round1(((bytes / Math.max(1, waiters)) * 10000) / MiB);
    const rssAbove = heldMemory.rss - idle.rss;
    const heapAbove = heldMemory.heapUsed - idle.heapUsed;
    const values = {
      rss_idle_mib: round1(rssIdle / MiB),
      rss_held_mib: round1(rssHeld / MiB),
      rss_after_mib: round1(rssAfter / MiB),
      rss_above_idle_uncollected_mib: round1((rssHeld - rssIdle) / MiB),
      rss_idle_collected_mib: round1(idle.rss / MiB),
      rss_held_collected_mib: round1(heldMemory.rss / MiB),
      rss_above_idle_mib: round1(rssAbove / MiB),
      rss_above_idle_per_10k_mib: per10k(rssAbove),
      rss_per_waiter_kib: round1(rssAbove / Math.max(1, waiters) / 1024),
      heap_used_idle_mib: round1(idle.heapUsed / MiB),
      heap_used_held_mib: round1(heldMemory.heapUsed / MiB),
      heap_used_above_idle_mib: round1(heapAbove / MiB),
      heap_per_waiter_kib: round1(heapAbove / Math.max(1, waiters) / 1024),
      outside_heap_per_waiter_kib: round1((rssAbove - heapAbove) / Math.max(1, waiters) / 1024),
      // Of the RSS above idle: V8's heap in RAM (live or slack), its young generation, and the rest (Node, libuv, malloc).
      heap_physical_above_idle_mib: round1((heldMemory.heapPhysical - idle.heapPhysical) / MiB),
      new_space_physical_idle_mib: round1(idle.newSpacePhysical / MiB),
      new_space_physical_held_mib: round1(heldMemory.newSpacePhysical / MiB),
      outside_v8_heap_above_idle_mib: round1((rssAbove - (heldMemory.heapPhysical - idle.heapPhysical)) / MiB),
      target_per_10k_mib: TARGET_MIB_PER_10K,
      meets_target: per10k(rssAbove) < TARGET_MIB_PER_10K,
      held: waiters,
      answered,
      correct,
      failed,
      failures: [...failures].map(([why, count]) => `${count} × ${why}`).join('; '),
      all_answered_ms: allAnsweredMs,
    };
    return {
      label: `${n} concurrent long-polls on one API process`,
      summary:
        `RSS ${values.rss_idle_mib} MiB idle, ${values.rss_held_mib} MiB holding ${waiters} (+${values.rss_above_idle_uncollected_mib} MiB as found); ` +
        `after a collection +${values.rss_above_idle_mib} MiB (${values.rss_above_idle_per_10k_mib} MiB per 10,000, ${values.rss_per_waiter_kib} KiB each; ` +
        `V8 heap +${values.heap_used_above_idle_mib} MiB, ${values.heap_per_waiter_kib} KiB each; target < ${TARGET_MIB_PER_10K} MiB: ${values.meets_target ? 'met' : 'not met'}); ` +
        `${correct}/${n} answered correctly (${failed} connection failures), all within ${allAnsweredMs} ms of the completions`,
      values,
    };
  } finally {
    agent.destroy();
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
    await t.drop();
  }
}
