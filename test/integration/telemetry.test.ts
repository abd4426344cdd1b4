// OpenTelemetry, as an operator turns it on: `stepwise dev` runs in a child process with the standard
// OTEL_* variables pointing at an OTLP/HTTP receiver in this test, which reads the spans exported
// (JSON). Without the variables nothing is exported and no SDK module is loaded: a preloaded script
// reports the modules the process loaded when it exits.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { context, ROOT_CONTEXT, trace, TraceFlags, type Context, type ContextManager } from '@opentelemetry/api';
import { defineTask } from '../../src/engine/task';
import { schedule } from '../../src/engine/schedule';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitUntil } from '../helpers/wait-until';

jest.setTimeout(120000);

const ROOT = path.join(__dirname, '..', '..');
const BIN = path.join(ROOT, 'bin', 'stepwise.js');
const TASKS = path.join(ROOT, 'test', 'fixtures', 'telemetry-tasks.ts');
const REPORT_MODULES = path.join(ROOT, 'test', 'fixtures', 'report-modules.cjs');

/** The parts of an OTLP/JSON span this test reads. */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string | number;
  attributes?: Array<{ key: string; value: Record<string, unknown> }>;
  events?: Array<{ name: string; attributes?: Array<{ key: string; value: Record<string, unknown> }> }>;
  links?: Array<{ traceId: string; spanId: string }>;
  status?: { code?: number };
}

/** OTLP's SpanKind numbers (the API's SpanKind plus one). */
const KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

/** A plain OTLP/HTTP receiver: POST /v1/traces with a JSON ExportTraceServiceRequest. */
class OtlpReceiver {
  readonly spans: OtlpSpan[] = [];
  readonly serviceNames = new Set<string>();
  requests = 0;
  private readonly server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
        res.writeHead(404).end();
        return;
      }
      this.requests += 1;
      const request = JSON.parse(body) as { resourceSpans: Array<{ resource: { attributes: OtlpSpan['attributes'] }; scopeSpans: Array<{ spans: OtlpSpan[] }> }> };
      for (const rs of request.resourceSpans) {
        const service = rs.resource.attributes?.find((a) => a.key === 'service.name')?.value.stringValue;
        if (typeof service === 'string') this.serviceNames.add(service);
        for (const ss of rs.scopeSpans) this.spans.push(...ss.spans);
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  named(name: string): OtlpSpan[] {
    return this.spans.filter((s) => s.name === name);
  }

  one(name: string, where: (s: OtlpSpan) => boolean = () => true): OtlpSpan {
    const found = this.named(name).filter(where);
    if (found.length !== 1) throw new Error(`expected one span ${name}, found ${found.length}: ${this.spans.map((s) => s.name).join(', ')}`);
    return found[0];
  }
}

/** An attribute's value, whatever OTLP/JSON wrapped it in (an int may come as text). */
function attr(span: { attributes?: OtlpSpan['attributes'] }, key: string): unknown {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  if (!value) return undefined;
  if ('intValue' in value) return Number(value.intValue);
  return value.stringValue ?? value.boolValue ?? value.doubleValue;
}

interface Dev {
  child: ChildProcess;
  url: string;
  output(): string;
  exited: Promise<number | null>;
}

/** `stepwise dev` on the test's database, with `env` added to a copy of this environment without OTEL_* variables. */
async function startDev(databaseUrl: string, modulesDir: string, env: Record<string, string>): Promise<Dev> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
  const child = spawn(process.execPath, [BIN, 'dev', '--port', '0', '--tasks', TASKS], {
    cwd: ROOT,
    env: {
      ...inherited,
      STEPWISE_FROM_SOURCE: '1',
      LOG_LEVEL: 'warn',
      DATABASE_URL: databaseUrl,
      STEPWISE_API_TOKENS: '',
      NODE_OPTIONS: `--require ${REPORT_MODULES}`,
      STEPWISE_TEST_MODULES_DIR: modulesDir,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let exitCode: number | null | undefined;
  void exited.then((code) => (exitCode = code));
  const url = await waitUntil(
    () => {
      if (exitCode !== undefined) throw new Error(`dev exited (${exitCode}) before it was ready: ${out}`);
      return /Stepwise is running at (http:\/\/\S+)\/api\/v1\n/.exec(out)?.[1];
    },
    'stepwise dev to print its URL',
    60000,
    50,
  );
  return { child, url, output: () => out, exited };
}

/** Stops `dev` as an operator does (SIGTERM), and returns what the preloaded script reported. */
async function stopDev(dev: Dev, modulesDir: string): Promise<{ modules: number; opentelemetry: string[] }> {
  dev.child.kill('SIGTERM');
  const code = await dev.exited;
  expect({ code, output: code === 0 ? '' : dev.output() }).toEqual({ code: 0, output: '' });
  return JSON.parse(readFileSync(path.join(modulesDir, `${dev.child.pid}.json`), 'utf8')) as { modules: number; opentelemetry: string[] };
}

async function api<T>(dev: Dev, method: string, route: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: T }> {
  const response = await fetch(`${dev.url}/api/v1${route}`, { method, headers: { 'content-type': 'application/json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as T };
}

async function statusOf(dev: Dev, id: string): Promise<string> {
  return (await api<{ status: string }>(dev, 'GET', `/executions/${id}`)).body.status;
}

const CALLER = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7' };
const DELIVERER = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331' };

let t: TestDatabase;
let modulesDir: string;
const running: Dev[] = [];

beforeAll(async () => {
  t = await createTestDatabase();
});
beforeEach(() => {
  modulesDir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-telemetry-'));
});
afterEach(() => {
  for (const dev of running.splice(0)) if (dev.child.exitCode === null) dev.child.kill('SIGKILL');
  rmSync(modulesDir, { recursive: true, force: true });
});
afterAll(async () => {
  await t.drop();
});

test('with OTEL_* set, attempts, steps, an event delivery and a child execution are spans in the caller trace', async () => {
  const receiver = new OtlpReceiver();
  const endpoint = await receiver.listen();
  try {
    const dev = await startDev(t.url, modulesDir, {
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'stepwise-telemetry-test',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    running.push(dev);

    const scheduled = await api<{ execution_id: string }>(dev, 'POST', '/executions', { task: 'telemetry.parent', data: { n: 1 } }, { traceparent: `00-${CALLER.traceId}-${CALLER.spanId}-01` });
    expect(scheduled.status).toBe(201);
    const id = scheduled.body.execution_id;
    // Scheduled without a traceparent: a trace of its own, named by the execution's id.
    const lone = await api<{ execution_id: string }>(dev, 'POST', '/executions', { task: 'telemetry.child', data: { n: 5 } }, { traceparent: 'not-a-traceparent' });
    expect(lone.status).toBe(201);
    await waitUntil(async () => (await statusOf(dev, id)) === 'waiting', 'the parent to wait for its event');
    const delivered = await api<{ status: string }>(dev, 'POST', `/events/${id}/approve`, { ok: true }, { traceparent: `00-${DELIVERER.traceId}-${DELIVERER.spanId}-01` });
    expect(delivered).toEqual({ status: 200, body: expect.objectContaining({ status: 'delivered' }) });
    await waitUntil(async () => (await statusOf(dev, id)) === 'completed' && (await statusOf(dev, lone.body.execution_id)) === 'completed', 'both executions to complete');

    const stored = await t.db('stepwise.executions').select('id', 'task', 'parent_id', 'traceparent');
    const parentRow = stored.find((r) => r.id === id);
    const childRow = stored.find((r) => r.parent_id === id);
    expect(parentRow?.traceparent).toBe(`00-${CALLER.traceId}-${CALLER.spanId}-01`);
    expect(stored.find((r) => r.id === lone.body.execution_id)?.traceparent).toBeNull();
    expect(childRow?.traceparent).toMatch(new RegExp(`^00-${CALLER.traceId}-[0-9a-f]{16}-01$`));

    // The last spans are exported by the shutdown's flush.
    const report = await stopDev(dev, modulesDir);
    expect(report.opentelemetry).toEqual(expect.arrayContaining(['sdk-trace-base', 'sdk-trace-node', 'exporter-trace-otlp-http']));
    await waitUntil(() => receiver.spans.some((s) => s.name === 'stepwise.step double' && attr(s, 'stepwise.execution_id') === childRow?.id), 'the spans to be exported');
    expect([...receiver.serviceNames]).toEqual(['stepwise-telemetry-test']);

    // The parent's three runs: up to the wait, from the delivery to the child's start, and after the
    // child finished. All children of the caller's span.
    const runs = receiver.named('stepwise.execution telemetry.parent').sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1));
    expect(runs.map((s) => attr(s, 'stepwise.outcome'))).toEqual(['suspended', 'suspended', 'completed']);
    const [first, resumed] = runs;
    for (const run of runs) {
      expect(run).toMatchObject({ traceId: CALLER.traceId, parentSpanId: CALLER.spanId, kind: KIND.consumer });
      expect(attr(run, 'stepwise.execution_id')).toBe(id);
      expect(attr(run, 'stepwise.task')).toBe('telemetry.parent');
      expect(attr(run, 'stepwise.attempt')).toBe(1);
      expect(attr(run, 'stepwise.task_version')).toBe('');
    }
    expect(runs.map((s) => attr(s, 'stepwise.previous_status'))).toEqual(['pending', 'waiting', 'waiting']);
    expect(first.events?.map((e) => e.name)).toContain('stepwise.wait_for_event');

    // The step is a child of the first run; a span made inside the step's function is the step's child.
    const step = receiver.one('stepwise.step fetch');
    expect(step).toMatchObject({ traceId: CALLER.traceId, parentSpanId: first.spanId, kind: KIND.internal });
    expect({ step: attr(step, 'stepwise.step'), kind: attr(step, 'stepwise.step.kind'), seq: attr(step, 'stepwise.step.seq'), attempt: attr(step, 'stepwise.step.attempt'), outcome: attr(step, 'stepwise.outcome') }).toEqual({
      step: 'fetch',
      kind: 'step',
      seq: 0,
      attempt: 1,
      outcome: 'completed',
    });
    expect(receiver.one('app.lookup')).toMatchObject({ traceId: CALLER.traceId, parentSpanId: step.spanId });

    // The delivery: under the deliverer's span, linked to the execution's trace.
    const delivery = receiver.one('stepwise.event approve');
    expect(delivery).toMatchObject({ traceId: DELIVERER.traceId, parentSpanId: DELIVERER.spanId, kind: KIND.producer });
    expect(delivery.links).toEqual([expect.objectContaining({ traceId: CALLER.traceId, spanId: CALLER.spanId })]);
    expect({ execution: attr(delivery, 'stepwise.execution_id'), event: attr(delivery, 'stepwise.event'), outcome: attr(delivery, 'stepwise.outcome') }).toEqual({ execution: id, event: 'approve', outcome: 'delivered' });

    // The child: started by a span of the resumed run, its own run and step under that span, in the same trace.
    const start = receiver.one('stepwise.child double');
    expect(start).toMatchObject({ traceId: CALLER.traceId, parentSpanId: resumed.spanId, kind: KIND.producer });
    expect(attr(start, 'stepwise.child.execution_id')).toBe(childRow?.id);
    expect(childRow?.traceparent).toBe(`00-${CALLER.traceId}-${start.spanId}-01`);
    const childRun = receiver.one('stepwise.execution telemetry.child', (s) => attr(s, 'stepwise.execution_id') === childRow?.id);
    expect(childRun).toMatchObject({ traceId: CALLER.traceId, parentSpanId: start.spanId, kind: KIND.consumer });
    expect(receiver.one('stepwise.step double', (s) => attr(s, 'stepwise.execution_id') === childRow?.id)).toMatchObject({ traceId: CALLER.traceId, parentSpanId: childRun.spanId });

    // Without a (valid) traceparent: the first run is the root of a trace whose id is the execution's.
    const hex = lone.body.execution_id.replace(/-/g, '');
    const loneRun = receiver.one('stepwise.execution telemetry.child', (s) => attr(s, 'stepwise.execution_id') === lone.body.execution_id);
    expect(loneRun).toMatchObject({ traceId: hex, spanId: hex.slice(16) });
    expect(loneRun.parentSpanId ?? '').toBe('');
  } finally {
    await receiver.close();
  }
});

test('without OTEL_* variables nothing is exported and no OpenTelemetry SDK module is loaded', async () => {
  const receiver = new OtlpReceiver();
  await receiver.listen();
  try {
    const dev = await startDev(t.url, modulesDir, {});
    running.push(dev);
    const traceparent = `00-${CALLER.traceId}-${CALLER.spanId}-01`;
    const scheduled = await api<{ execution_id: string }>(dev, 'POST', '/executions', { task: 'telemetry.parent', data: { n: 2 } }, { traceparent });
    const id = scheduled.body.execution_id;
    await waitUntil(async () => (await statusOf(dev, id)) === 'waiting', 'the parent to wait for its event');
    expect((await api(dev, 'POST', `/events/${id}/approve`, { ok: false })).status).toBe(200);
    await waitUntil(async () => (await statusOf(dev, id)) === 'completed', 'the parent to complete');
    // The trace context is kept all the same: another process (with tracing) may run it.
    expect((await t.db('stepwise.executions').where({ id }).first('traceparent')).traceparent).toBe(traceparent);

    const report = await stopDev(dev, modulesDir);
    expect(report.modules).toBeGreaterThan(100);
    // @opentelemetry/api alone (schedule() reads the caller's active span through it) is a no-op.
    expect(report.opentelemetry.filter((m) => m !== 'api')).toEqual([]);
    expect(receiver.requests).toBe(0);
  } finally {
    await receiver.close();
  }
});

/** The smallest context manager: enough for a span made active around a synchronous call. */
class StackContextManager implements ContextManager {
  private current: Context = ROOT_CONTEXT;
  active(): Context {
    return this.current;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    const previous = this.current;
    this.current = ctx;
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.current = previous;
    }
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.current = ROOT_CONTEXT;
    return this;
  }
}

test("schedule() stores the traceparent it is given, else the caller's active span, and refuses a malformed one", async () => {
  const task = defineTask({ name: 'telemetry.sdk', async run() {} });
  const stored = async (id: string) => (await t.db('stepwise.executions').where({ id }).first('traceparent')).traceparent as string | null;

  const given = `00-${CALLER.traceId}-${CALLER.spanId}-00`;
  expect(await stored((await schedule(t.db, task, undefined, { traceparent: given })).executionId)).toBe(given);
  await expect(schedule(t.db, task, undefined, { traceparent: given.toUpperCase() })).rejects.toThrow(TypeError);
  expect(await stored((await schedule(t.db, task, undefined)).executionId)).toBeNull();

  context.setGlobalContextManager(new StackContextManager());
  try {
    const active = trace.setSpan(ROOT_CONTEXT, trace.wrapSpanContext({ traceId: DELIVERER.traceId, spanId: DELIVERER.spanId, traceFlags: TraceFlags.SAMPLED }));
    // Read before schedule() first waits: the span is active while the call starts.
    const scheduled = await context.with(active, () => schedule(t.db, task, undefined));
    expect(await stored(scheduled.executionId)).toBe(`00-${DELIVERER.traceId}-${DELIVERER.spanId}-01`);
    // The option wins over the active span.
    const explicit = await context.with(active, () => schedule(t.db, task, undefined, { traceparent: given }));
    expect(await stored(explicit.executionId)).toBe(given);
  } finally {
    context.disable();
  }
});
