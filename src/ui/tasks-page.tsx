/** Registered tasks: their schemas, counts by status, and a form to schedule an execution. */
import { useState } from 'preact/hooks';
import type { Task } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox, Instant, JsonEditor, Section } from './components';
import { formatJson } from '../domain/format';
import { checkJson, sampleFromSchema, type JsonProblem } from './json-input';
import { STATUSES, routeHref } from './routes';
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
  const { client, navigate } = useApi();
  // The API takes `data` as a JSON object; a task without a schema starts from `{}`.
  const [text, setText] = useState(() => formatJson(sampleFromSchema(task.data_schema) ?? {}));
  const [key, setKey] = useState('');
  /** `YYYY-MM-DDTHH:mm` from a datetime-local input, in the browser's time zone; empty for "at once". */
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
        ...(startAt ? { startAt: new Date(startAt) } : {}),
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
        <span>Start at, your local time (optional; empty starts at once)</span>
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

function TaskCard({ task, now }: { task: Task; now: number }) {
  const events = Object.entries(task.event_schemas ?? {});
  return (
    <Section title={task.name} testId={`task-${task.name}`}>
      <TaskWorkers task={task} />
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
      {task.cron && (
        <p data-testid="task-cron">
          Runs on <code>{task.cron.pattern}</code> ({task.cron.timezone}); next{' '}
          {task.cron.next_at ? <Instant iso={task.cron.next_at} now={now} /> : <span class="muted">never</span>}
        </p>
      )}
      {task.concurrency_limit !== null && (
        <p data-testid="task-concurrency">At most {task.concurrency_limit} running at once, over all workers.</p>
      )}
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
          <TaskCard key={t.name} task={t} now={now} />
        ))}
      </div>
    </div>
  );
}
