/** One execution: its facts, what it waits for, its timeline and attempts, and the cancel, retry, upgrade and deliver-event actions. */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import type { Attempt, Execution, ExecutionList, Step, Task } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { AttemptsSection } from './attempts-section';
import { ApiErrorBox, Instant, JsonBlock, Priority, Section, StatusBadge, TagChips, useFormatInstant } from './components';
import { formatDuration, formatRelative } from '../domain/format';
import { CancelButton, RetryButton } from './execution-actions';
import { routeHref, withFilter } from './routes';
import { isTerminal } from './statuses';
import { runTimes } from './run-time';
import { describeWait } from './timeline';
import { Timeline } from './timeline-view';
import { usePolling } from './use-polling';
import { useStream, useThrottledReload } from './use-stream';
import { EventForm } from './event-form';
import { ExecutionsTable } from './executions-table';
import { DivergenceBox, ExecutionVersion, UnservedVersionWarning } from './execution-version';

/** While its child executions run: how often the page reads them again (their changes are not on its stream). */
const REFRESH_MS = 2000;
const TASKS_REFRESH_MS = 5000;
/** The most often a burst of changes reloads the page (steps, attempts, children). */
const RELOAD_MIN_MS = 500;

function WaitInfo({ execution, steps, now }: { execution: Execution; steps: Step[]; now: number }) {
  const formatInstant = useFormatInstant();
  const wait = describeWait(execution, steps, now);
  if (!wait) return null;
  let text: string;
  switch (wait.kind) {
    case 'event':
      text =
        `Waiting for event “${wait.eventName}” since ${formatInstant(wait.sinceMs)}` +
        (wait.timeoutMs === null ? ', with no timeout.' : `; times out ${formatInstant(wait.timeoutMs)} (${formatRelative(wait.timeoutMs, now)}).`);
      break;
    case 'sleep':
      text = `Sleeping in “${wait.name}”` + (wait.untilMs === null ? '.' : ` until ${formatInstant(wait.untilMs)} (${formatRelative(wait.untilMs, now)}).`);
      break;
    case 'child':
      return (
        <p class="wait-info wait-child" data-testid="wait-info">
          Waiting in “{wait.name}” for child execution{' '}
          <a class="mono" href={routeHref({ page: 'execution', id: wait.childId })}>
            {wait.childId}
          </a>{' '}
          to finish.
        </p>
      );
    case 'retry':
      text = `Pending a retry after attempt ${wait.attempt} failed: ${wait.reason}`;
      break;
    case 'scheduled':
      text = `Scheduled to start ${formatInstant(wait.startMs)} (${formatRelative(wait.startMs, now)}).`;
      break;
    case 'queued':
      text = `Queued for a worker since ${formatInstant(wait.sinceMs)} (${formatRelative(wait.sinceMs, now)}).`;
      break;
    case 'running':
      text = wait.step ? `Running “${wait.step}”.` : 'Running.';
      break;
  }
  return (
    <p class={`wait-info wait-${wait.kind}`} data-testid="wait-info">
      {text}
    </p>
  );
}

/**
 * A pending or waiting execution whose task no live worker serves never moves on: say so. Nothing is
 * said before the task list has answered; a task missing from it has no worker either.
 */
function NoWorkerWarning({ execution, tasks }: { execution: Execution; tasks: Task[] | undefined }) {
  if (tasks === undefined || (execution.status !== 'pending' && execution.status !== 'waiting')) return null;
  const workers = tasks.find((t) => t.name === execution.task)?.workers ?? 0;
  if (workers > 0) return null;
  const outcome = execution.status === 'pending' ? 'it stays pending' : 'it will not resume';
  return (
    <p class="warning-box" role="status" data-testid="no-worker-warning">
      No worker serves task “{execution.task}”: {outcome} until one that serves it starts.
    </p>
  );
}

/** A paused task's executions are not claimed: a pending one stays pending until the task resumes. */
function PausedWarning({ execution, task }: { execution: Execution; task: Task | undefined }) {
  if (!task?.paused || (execution.status !== 'pending' && execution.status !== 'waiting')) return null;
  return (
    <p class="warning-box" role="status" data-testid="paused-warning">
      Task “{task.name}” is paused: {execution.status === 'pending' ? 'it stays pending' : 'it will not resume'} until the task is resumed on the{' '}
      <a href={routeHref({ page: 'tasks' })}>tasks page</a>.
    </p>
  );
}

function Fact({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="fact">
      <dt>{label}</dt>
      <dd>{children}</dd>
    </div>
  );
}

export function ExecutionPage({ id }: { id: string }) {
  const { client, autoRefresh } = useApi();
  // The execution has ended; some of its children still run (a finished parent's may too).
  const [finished, setFinished] = useState(false);
  const [childrenRunning, setChildrenRunning] = useState(false);
  const terminal = finished && !childrenRunning;
  const [delivered, setDelivered] = useState<string | undefined>(undefined);
  const polled = usePolling<{ execution: Execution; steps: Step[]; attempts: Attempt[]; children?: ExecutionList }>(
    async () => {
      // The execution first, its history after: read together, the history could predate the state
      // (a sleep's status with no sleep step yet), and the stream, seeing that state, reloads no more.
      const execution = await client.get(id);
      const [steps, attempts] = await Promise.all([client.listSteps(id), client.listAttempts(id)]);
      // Only an execution whose handler started children has any to list.
      const children = steps.some((s) => s.kind === 'child') ? await client.list({ parent_execution_id: id, order: 'asc', limit: CHILDREN_SHOWN }) : undefined;
      setFinished(isTerminal(execution.status));
      setChildrenRunning((children?.executions ?? []).some((c) => !isTerminal(c.status)));
      return { execution, steps, attempts, children };
    },
    [client, id],
    // Polled only while children run; the execution's own changes come from its stream.
    { intervalMs: REFRESH_MS, enabled: autoRefresh && childrenRunning },
  );
  // While it may still move, its stream (GET /executions/{id}/stream, read with fetch: EventSource
  // sends no Authorization header) reloads the page on every change, at most every RELOAD_MIN_MS. The
  // stream ends after the terminal state; a retry from this page starts it again.
  const reloadSoon = useThrottledReload(polled.reload, RELOAD_MIN_MS);
  // Its first event is the state just loaded, as a rule: no need to load it again.
  const onState = (e: Execution) => JSON.stringify(e) !== JSON.stringify(polled.data?.execution) && reloadSoon();
  const live = useStream((signal) => client.watch(id, { signal }), onState, [client, id], autoRefresh && !finished);
  // Refreshed while the execution may still move: whether a worker serves its task can change.
  const tasks = usePolling<Task[]>(() => client.listTasks(), [client], { intervalMs: TASKS_REFRESH_MS, enabled: autoRefresh && !terminal });
  useAuthPrompt(polled.error, tasks.error, live.error);
  const now = Date.now();
  if (!polled.data) {
    return (
      <div>
        <h1>Execution <span class="mono">{id}</span></h1>
        <ApiErrorBox error={polled.error} />
        {!polled.error && <p class="muted">Loading…</p>}
      </div>
    );
  }
  const { execution: x, steps, attempts, children } = polled.data;
  const task = tasks.data?.find((t) => t.name === x.task);
  const times = runTimes(x, attempts, steps, now);
  return (
    <div data-testid="execution-detail" data-status={x.status}>
      <div class="toolbar">
        <h1>
          Execution <span class="mono">{x.execution_id}</span>
        </h1>
        <StatusBadge status={x.status} />
      </div>
      <ApiErrorBox error={polled.error} />
      <WaitInfo execution={x} steps={steps} now={now} />
      <PausedWarning execution={x} task={task} />
      <NoWorkerWarning execution={x} tasks={tasks.data} />
      <UnservedVersionWarning execution={x} task={task} onDone={polled.reload} />
      <CancelButton execution={x} onDone={polled.reload} />
      <RetryButton execution={x} onDone={polled.reload} />
      <div class="columns">
        <Section title="Facts">
          <dl class="facts">
            <Fact label="Task">
              <a href={routeHref({ page: 'executions', filter: { task: x.task, offset: 0, limit: 20 } })}>{x.task}</a>
            </Fact>
            <Fact label="Status">
              <StatusBadge status={x.status} />
            </Fact>
            <Fact label="Attempt">
              <span data-testid="attempt">{x.attempt}</span>
            </Fact>
            <Fact label="Priority">
              <span data-testid="priority">
                <Priority value={x.priority} />
              </span>
            </Fact>
            <Fact label="Task version">
              <ExecutionVersion execution={x} />
            </Fact>
            {x.concurrency_key !== null && (
              <Fact label="Concurrency key">
                <span class="mono" data-testid="concurrency-key" title={task?.concurrency?.key ? `Its data's ${task.concurrency.key}` : undefined}>
                  {x.concurrency_key === '' ? <span class="muted">(no value)</span> : x.concurrency_key}
                </span>
              </Fact>
            )}
            {x.parent_execution_id !== null && (
              <Fact label="Parent">
                <a class="mono" data-testid="parent-link" href={routeHref({ page: 'execution', id: x.parent_execution_id })}>
                  {x.parent_execution_id}
                </a>
              </Fact>
            )}
            {x.idempotency_key !== null && (
              <Fact label="Idempotency key">
                <span class="mono" data-testid="idempotency-key">
                  {x.idempotency_key}
                </span>
              </Fact>
            )}
            {x.tags.length > 0 && (
              <Fact label="Tags">
                <TagChips tags={x.tags} href={(tag) => routeHref(withFilter({ offset: 0, limit: 20 }, { tags: [tag] }))} />
              </Fact>
            )}
            <Fact label="Steps completed">{x.steps_completed}</Fact>
            <Fact label="Current step">{x.current_step ?? <span class="muted">–</span>}</Fact>
            <Fact label="Created">
              <span data-testid="created-at">
                <Instant iso={x.created_at} now={now} />
              </span>
            </Fact>
            {x.start_at !== null && (
              <Fact label="Scheduled for">
                <span data-testid="start-at">
                  <Instant iso={x.start_at} now={now} />
                </span>
              </Fact>
            )}
            <Fact label="Started">
              <Instant iso={x.started_at} now={now} />
            </Fact>
            <Fact label="Completed">
              <Instant iso={x.completed_at} now={now} />
            </Fact>
            <Fact label="Run time">
              <span data-testid="run-time" title="Time the handler ran, summed over the attempts; sleeps, waits and retry delays are not in it">
                {times.elapsedMs === null ? '–' : formatDuration(times.runningMs)}
              </span>
              {times.attempts.length > 1 && <span class="muted small"> in {times.attempts.length} attempts</span>}
            </Fact>
            <Fact label="Waiting">
              <span
                data-testid="wait-time"
                title={`From the first start to ${x.completed_at ? 'the end' : 'now'} (${times.elapsedMs === null ? '–' : formatDuration(times.elapsedMs)}), the time it did not run: retry delays, sleeps, event and child waits, queueing for a worker`}
              >
                {times.elapsedMs === null ? '–' : formatDuration(times.waitingMs)}
              </span>
            </Fact>
          </dl>
        </Section>
        <Section title="Data">
          <JsonBlock value={x.data} testId="execution-data" />
          {x.status === 'completed' && (
            <>
              <h3>Output</h3>
              <JsonBlock value={x.output} testId="execution-output" />
            </>
          )}
          {x.error && (
            <>
              <h3>Error</h3>
              <div class="error-box" data-testid="execution-error">
                <strong>{x.error.type}</strong>: {x.error.message}
                {x.error.divergence && <DivergenceBox divergence={x.error.divergence} />}
                <div class="muted small">{x.error.retryable ? 'retryable' : 'not retryable'}</div>
              </div>
            </>
          )}
        </Section>
      </div>
      {/* Once the task list has answered: the form's event names and skeleton come from the task. */}
      {!isTerminal(x.status) && (tasks.data !== undefined || tasks.error !== undefined) && (
        <EventForm
          execution={x}
          task={task}
          onDelivered={(message) => {
            setDelivered(message);
            if (message !== undefined) polled.reload();
          }}
        />
      )}
      {delivered && (
        <p class="ok" data-testid="event-delivered">
          {delivered}
        </p>
      )}
      <Section title="Timeline" testId="timeline-section">
        <Timeline execution={x} steps={steps} now={now} />
      </Section>
      <AttemptsSection attempts={attempts} times={times.attempts} now={now} />
      {children && <Children parentId={x.execution_id} list={children} now={now} />}
    </div>
  );
}

/** Children shown on a parent's page; `total` says when there are more. */
const CHILDREN_SHOWN = 100;

function Children({ parentId, list, now }: { parentId: string; list: ExecutionList; now: number }) {
  return (
    <Section title={`Child executions (${list.total})`} testId="children-section">
      <ExecutionsTable items={list.executions} now={now} />
      {list.total > list.executions.length && (
        <p class="muted small">
          The first {list.executions.length} of {list.total}, oldest first:{' '}
          <a data-testid="all-children" href={routeHref({ page: 'executions', filter: { parent: parentId, offset: 0, limit: 100 } })}>
            page through all of them
          </a>
          .
        </p>
      )}
    </Section>
  );
}
