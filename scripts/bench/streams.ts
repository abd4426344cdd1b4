// N concurrent execution streams (GET /executions/{id}/stream) on one `stepwise serve` process: its
// RSS idle and holding them, and, once every execution completes, that each stream sent its terminal
// event and closed, with the time from the completion's commit to the terminal event.
import { spawn } from 'node:child_process';
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

type FreshDatabase = (env: NodeJS.ProcessEnv) => Promise<{ url: string; db: Db; drop(): Promise<void> }>;

export interface StreamsResult {
  label: string;
  summary: string;
  values: Record<string, number | boolean | string>;
}

const ROOT = path.join(__dirname, '..', '..');

function rssMiB(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  return Math.round((kb / 1024) * 10) / 10;
}

const percentile = (values: number[], p: number) => {
  const s = [...values].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] * 100) / 100;
};

function get(port: number, urlPath: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: urlPath }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      })
      .on('error', reject);
  });
}

/** One stream as the benchmark follows it: when its first and its terminal event came, whether it closed. */
interface Follower {
  id: string;
  first: boolean;
  terminalAt: number | undefined;
  ended: boolean;
  failed: boolean;
}

function follow(port: number, id: string, agent: http.Agent): Follower {
  const f: Follower = { id, first: false, terminalAt: undefined, ended: false, failed: false };
  let buffer = '';
  const req = http.get({ host: '127.0.0.1', port, path: `/api/v1/executions/${id}/stream`, agent }, (res) => {
    if (res.statusCode !== 200) {
      f.failed = true;
      res.resume();
      return;
    }
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      buffer += chunk;
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (!data) continue;
        f.first = true;
        const e = JSON.parse(data) as { execution_id: string; status: string; output: unknown };
        if (e.status === 'completed' && e.execution_id === id && e.output === id) f.terminalAt = performance.now();
      }
    });
    res.on('end', () => void (f.ended = true));
    res.on('error', () => void (f.failed = true));
  });
  req.on('error', () => void (f.failed = true));
  return f;
}

async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** N concurrent streams on one API process: RSS, and that each ends with its terminal event. */
export async function streams(env: NodeJS.ProcessEnv, n: number, freshDatabase: FreshDatabase): Promise<StreamsResult> {
  const t = await freshDatabase(env);
  await upsertTasks(t.db, new TaskRegistry([defineTask({ name: 'bench-stream', run: async () => null }) as never]).toRegistrations());
  const ids: string[] = [];
  for (let i = 0; i < n; i += 1000) {
    const batch = await insertExecutions(t.db, Array.from({ length: Math.min(1000, n - i) }, () => ({ task: 'bench-stream', data: null })));
    ids.push(...batch.map((b) => b.execution.id));
  }
  const port = await findFreePort();
  const args = env.STEPWISE_DIST ? stepwiseArgs(env.STEPWISE_DIST, ['serve']) : [path.join(ROOT, 'bin', 'stepwise.js'), 'serve'];
  const child = spawn(process.execPath, args, { env: { ...process.env, DATABASE_URL: t.url, PORT: String(port), LOG_LEVEL: 'warn' }, stdio: ['ignore', 'inherit', 'inherit'] });
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  try {
    await until(() => get(port, '/readyz').then((r) => r.status === 200, () => false), 'stepwise serve to start', 30000);
    const rssIdle = rssMiB(child.pid as number);
    const followers: Follower[] = [];
    const opening = performance.now();
    // Clients connect in waves of 500, as real ones would, rather than overflowing the listen backlog.
    for (let i = 0; i < ids.length; i += 500) {
      for (const id of ids.slice(i, i + 500)) followers.push(follow(port, id, agent));
      await new Promise((r) => setTimeout(r, 50));
    }
    await until(() => followers.every((f) => f.first || f.failed), 'every stream to send its first state', 120000);
    const openedMs = Math.round(performance.now() - opening);
    const gauge = async () => Number(/^stepwise_http_streams_open\{stream="execution"\} (\d+)/m.exec((await get(port, '/metrics')).text)?.[1] ?? NaN);
    const held = await gauge();
    const rssHeld = rssMiB(child.pid as number);

    // Complete every execution (as a worker would), 200 to a statement with one NOTIFY each (8 kB payloads).
    const committed = new Map<string, number>();
    const started = performance.now();
    for (let i = 0; i < ids.length; i += 200) {
      const batch = ids.slice(i, i + 200);
      await t.db.raw(
        `WITH d AS (UPDATE stepwise.executions SET status = 'completed', output = to_jsonb(id::text), completed_at = now(), due_at = NULL
                     WHERE id = ANY(?::uuid[]) RETURNING id)
         SELECT pg_notify('stepwise_changed', string_agg(id::text, ',')) FROM d`,
        [batch],
      );
      const at = performance.now();
      for (const id of batch) committed.set(id, at);
    }
    const completionsMs = Math.round(performance.now() - started);
    await until(() => followers.every((f) => f.ended || f.failed), 'every stream to end', 120000);
    const allEndedMs = Math.round(performance.now() - started);
    const rssAfter = rssMiB(child.pid as number);
    const correct = followers.filter((f) => f.terminalAt !== undefined && f.ended && !f.failed).length;
    const failed = followers.filter((f) => f.failed).length;
    // The NOTIFY can beat the commit's acknowledgment to this process: then the event took no time.
    const latencies = followers.flatMap((f) => (f.terminalAt === undefined ? [] : [Math.max(0, f.terminalAt - (committed.get(f.id) as number))]));
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    await until(async () => (await gauge()) === 0, 'the server to release every stream', 30000);
    return {
      label: `${n} concurrent execution streams on one API process`,
      summary:
        `RSS ${rssIdle} MiB idle, ${rssHeld} MiB holding ${held} streams (${Math.round(((rssHeld - rssIdle) * 1024) / Math.max(1, held))} KiB each; all open in ${openedMs} ms); ` +
        `${correct}/${n} got their terminal event and closed (${failed} failures); commit -> terminal event p50 ${p50} ms, p99 ${p99} ms; all closed within ${allEndedMs} ms of the first completion (${n / 200} completion statements took ${completionsMs} ms)`,
      values: { rss_idle_mib: rssIdle, rss_held_mib: rssHeld, rss_after_mib: rssAfter, held, opened_ms: openedMs, correct, failed, terminal_p50_ms: p50, terminal_p99_ms: p99, all_ended_ms: allEndedMs, completions_ms: completionsMs },
    };
  } finally {
    agent.destroy();
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
    await t.drop();
  }
}
