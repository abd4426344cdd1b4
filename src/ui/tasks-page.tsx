/** Registered tasks: their schemas, counts by status, versions, pause and resume, and a form to schedule an execution. */
import { useState } from 'preact/hooks';
import type { Task } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox, Instant, JsonEditor, Section } from './components';
import { formatJson } from '../domain/format';
import { describeLimits, formatPeriod } from '../domain/flow-text';
import { checkJson, sampleFromSchema, type JsonProblem } from './json-input';
import { routeHref } from './routes';
import { STATUSES } from './statuses';
import { TaskVersions } from './task-versions';
import { ThroughputChart } from './throughput-chart';
import { fromDateTimeInput } from './time-zone';
import { usePolling } from './use-polling';

/** An execution's `data`: JSON that is an object (the contract's rule), then the task's schema. */
function checkData(text: string, schema: unknown): { ok: true; value: Record<string, unknown> } | { ok: false; problems: JsonProblem[] } {
  const check = checkJson(text, schema);
  if (!check.ok) return check;
  const value = check.value;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { ok: false, problems: [{ path: '', message: 'Data must be a JSON object ({} for none).' }] };
  return { ok: true, value: value as Record<string, unknown> };
}

function ScheduleForm({ task }: { task: Task }) {
  const { client, navigate, timeZone } = useApi();
  // The API takes `data` as a JSON object; a task without a schema starts from `{}`.
  const [text, setText] = useState(() => formatJson(sampleFromSchema(task.data_schema) ?? {}));
  const [key, setKey] = useState('');
  /** `YYYY-MM-DDTHH:mm` from a datetime-local input, in the zone chosen in the header; empty for "at once". */
  const [startAt, setStartAt] = useState('');
  const [problems, setProblems] = useState<JsonProblem[]>([]);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  useAuthPrompt(error);
  const edit = (value: string) => {
    setText(value);
    const check = checkData(value, task.data_schema);
    setProblems(check.ok ? [] : check.problems);
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    const check = checkData(text, task.data_schema);
    if (!check.ok) return setProblems(check.problems);
    setBusy(true);
    try {
      const created = await client.schedule(task.name, check.value, {
        ...(key ? { idempotencyKey: key } : {}),
        ...(startAt ? { startAt: fromDateTimeInput(startAt, timeZone) } : {}),
      });
      navigate(routeHref({ page: 'execution', id: created.execution_id }));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="schedule" onSubmit={submit} data-testid={`schedule-${task.name}`}>
      <JsonEditor label="Data (JSON)" value={text} onInput={edit} problems={problems} testId="schedule-data" rows={5} />
      <label class="field">
        <span>Idempotency key (optional)</span>
        <input type="text" maxLength={255} value={key} onInput={(e) => setKey(e.currentTarget.value)} />
      </label>
      <label class="field">
        <span>Start at, {timeZone === 'utc' ? 'UTC' : 'your local time'} (optional; empty starts at once)</span>
        <input type="datetime-local" value={startAt} onInput={(e) => setStartAt(e.currentTarget.value)} data-testid="schedule-start-at" />
      </label>
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          Schedule
        </button>
      </div>
      <ApiErrorBox error={error} />
    </form>
  );
}

/** How many live workers serve the task, and a warning when none does: its executions would wait forever. */
function TaskWorkers({ task }: { task: Task }) {
  const n = task.workers;
  return (
    <>
      {n === 0 && (
        <p class="warning-box" role="status" data-testid="no-worker-warning">
          No worker serves this task: its executions stay pending until one that serves it starts.
        </p>
      )}
      <p data-testid="task-workers" data-workers={n}>
        <a href={routeHref({ page: 'workers' })}>{n === 1 ? '1 live worker' : `${n} live workers`}</a> {n === 1 ? 'serves' : 'serve'} this task.
      </p>
    </>
  );
}

/** The task's concurrency limit, rate limit and debounce in plain words, when it has any. */
function FlowLimits({ task }: { task: Task }) {
  const limits = describeLimits(task);
  if (limits.length === 0) return null;
  return (
    <p class="limits" data-testid="task-limits">
      Limits:{' '}
      {limits.map((l) => (
        <span key={l.kind} class="chip limit" title={l.title} data-testid="task-limit" data-kind={l.kind}>
          {l.text}
        </span>
      ))}
    </p>
  );
}

/** For a keyed limit: the busiest key values (most waiting first, at most 20), what runs and waits for each. */
function TaskKeys({ task }: { task: Task }) {
  if (task.keys.length === 0) return null;
  const windowed = task.keys.some((k) => k.started_in_window !== null);
  const span = task.rate_limit ? ` (last ${formatPeriod(task.rate_limit.period_ms)})` : '';
  return (
    <>
      <h3>Keys, most waiting first</h3>
      <div class="table-scroll">
        <table class="keys" data-testid="task-keys">
          <thead>
            <tr>
              <th>Key</th>
              <th class="num">Running</th>
              <th class="num">Waiting</th>
              {windowed && <th class="num">Started{span}</th>}
            </tr>
          </thead>
          <tbody>
            {task.keys.map((k) => (
              <tr key={k.key} data-testid="task-key" data-key={k.key}>
                <td class="mono">{k.key === '' ? <span class="muted">(no value)</span> : k.key}</td>
                <td class="num" data-testid="key-running">{k.running}</td>
                <td class="num" data-testid="key-waiting">{k.waiting}</td>
                {windowed && (
                  <td class="num" data-testid="key-started">
                    {k.started_in_window ?? '—'}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

/**
 * Pause stops the task's executions from being claimed (running ones finish); resume lets workers
 * take them again at once. Neither is destructive, so neither asks first.
 */
function PauseButton({ task, onDone }: { task: Task; onDone(): void }) {
  const { client } = useApi();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  useAuthPrompt(error);
  const toggle = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await (task.paused ? client.resumeTask(task.name) : client.pauseTask(task.name));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
      onDone();
    }
  };
  return (
    <span class="card-action">
      <button
        type="button"
        class={task.paused ? 'primary' : ''}
        disabled={busy}
        onClick={toggle}
        title={task.paused ? 'Let workers claim its executions again' : 'Stop claiming its executions; running ones finish'}
        data-testid="pause-toggle"
        data-paused={String(task.paused)}
      >
        {task.paused ? 'Resume' : 'Pause'}
      </button>
      <ApiErrorBox error={error} testId="pause-error" />
    </span>
  );
}

function TaskCard({ task, now, onChanged }: { task: Task; now: number; onChanged(): void }) {
  const events = Object.entries(task.event_schemas ?? {});
  const title = (
    <>
      {task.name}{' '}
      {task.paused && (
        <span class="status status-paused" data-testid="paused-badge">
          paused
        </span>
      )}
    </>
  );
  return (
    <Section title={title} aside={<PauseButton task={task} onDone={onChanged} />} testId={`task-${task.name}`}>
      {task.paused && (
        <p class="warning-box" role="status" data-testid="paused-note">
          Paused: its executions are not claimed (pending ones stay pending); running ones finish.
        </p>
      )}
      <TaskWorkers task={task} />
      <ThroughputChart task={task.name} compact />
      <div class="table-scroll">
        <table class="counts">
          <thead>
            <tr>
              {STATUSES.map((s) => (
                <th key={s}>{s}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            <tr>
              {STATUSES.map((s) => (
                <td key={s} class="num">
                  <a class={`count status-text-${s}`} href={routeHref({ page: 'executions', filter: { task: task.name, status: s, offset: 0, limit: 20 } })}>
                    {task.counts[s]}
                  </a>
                </td>
              ))}
            </tr>
          </tbody>
        </table>
      </div>
      {task.cron && (
        <p data-testid="task-cron">
          Runs on <code>{task.cron.pattern}</code> ({task.cron.timezone}); next{' '}
          {task.cron.next_at ? <Instant iso={task.cron.next_at} now={now} /> : <span class="muted">never</span>}
        </p>
      )}
      <FlowLimits task={task} />
      <TaskKeys task={task} />
      <TaskVersions task={task} onChanged={onChanged} />
      <p class="muted small">
        Registered <Instant iso={task.updated_at} now={now} relative />
      </p>
      <details>
        <summary>Data schema</summary>
        {task.data_schema === null ? <p class="muted">Any data is accepted.</p> : <pre class="json">{formatJson(task.data_schema)}</pre>}
      </details>
      <details>
        <summary>Event schemas ({events.length})</summary>
        {events.length === 0 && <p class="muted">No events declared.</p>}
        {events.map(([name, schema]) => (
          <div key={name}>
            <h3 class="mono">{name}</h3>
            <pre class="json">{formatJson(schema)}</pre>
          </div>
        ))}
      </details>
      <details>
        <summary>Schedule an execution</summary>
        <ScheduleForm task={task} />
      </details>
    </Section>
  );
}

export function TasksPage() {
  const { client, autoRefresh } = useApi();
  const tasks = usePolling<Task[]>(() => client.listTasks(), [client], { intervalMs: 5000, enabled: autoRefresh });
  useAuthPrompt(tasks.error);
  const now = Date.now();
  return (
    <div>
      <div class="toolbar">
        <h1>Tasks</h1>
      </div>
      <ApiErrorBox error={tasks.error} />
      {!tasks.data && !tasks.error && <p class="muted">Loading…</p>}
      {tasks.data?.length === 0 && <p class="muted">No task is registered yet: start a worker.</p>}
      <div class="task-grid">
        {tasks.data?.map((t) => (
          <TaskCard key={t.name} task={t} now={now} onChanged={tasks.reload} />
        ))}
      </div>
    </div>
  );
}
