/** An execution's attempts: which worker ran each, when, how it ended, and why it failed (the stack folded). */
import type { Attempt } from '../client';
import { formatDuration } from '../domain/format';
import { Instant, Section, StatusBadge } from './components';
import { routeHref } from './routes';
import type { AttemptState, AttemptTime } from './run-time';

/** The badge of an attempt without an outcome yet: running now, suspended in a wait, or queued to resume. */
const OPEN_BADGE: Record<Exclude<AttemptState, 'ended'>, { status: string; label: string; title: string }> = {
  running: { status: 'running', label: 'running', title: 'A worker runs it now' },
  suspended: { status: 'waiting', label: 'waiting', title: 'Suspended: it resumes when its sleep, event or child wait ends; no worker holds it' },
  queued: { status: 'pending', label: 'queued', title: 'Its wait is over: it resumes when a worker claims it' },
};

function OutcomeBadge({ outcome, state }: { outcome: Attempt['outcome']; state: AttemptState }) {
  if (outcome !== null) return <StatusBadge status={outcome} />;
  const badge = OPEN_BADGE[state === 'ended' ? 'running' : state];
  return (
    <span class={`status status-${badge.status}`} data-status={badge.label} title={badge.title}>
      {badge.label}
    </span>
  );
}

function AttemptError({ error }: { error: NonNullable<Attempt['error']> }) {
  return (
    <div data-testid="attempt-error">
      <strong>{error.type}</strong>: <span data-testid="attempt-error-message">{error.message}</span>
      {error.stack && (
        <details class="stack" data-testid="attempt-stack">
          <summary>Stack trace</summary>
          <pre class="json">{error.stack}</pre>
        </details>
      )}
    </div>
  );
}

/** `times` are the attempts' running times (run-time.ts), in the same order. */
export function AttemptsSection({ attempts, times, now }: { attempts: Attempt[]; times: AttemptTime[]; now: number }) {
  return (
    <Section title={`Attempts (${attempts.length})`} testId="attempts-section">
      {attempts.length === 0 ? (
        <p class="muted">No worker has claimed it yet.</p>
      ) : (
        <div class="table-scroll">
          <table class="attempts">
            <thead>
              <tr>
                <th class="num">#</th>
                <th>Worker</th>
                <th>Started</th>
                <th>Ended</th>
                <th class="num" title="Time the handler ran in the attempt; sleeps, waits and step retry delays are not in it">
                  Run time
                </th>
                <th>Outcome</th>
                <th>Error</th>
              </tr>
            </thead>
            <tbody>
              {attempts.map((a, i) => {
                const time = times[i];
                const state = time?.state ?? 'ended';
                return (
                  <tr key={a.attempt} data-testid="attempt-row" data-attempt={a.attempt} data-outcome={a.outcome ?? state}>
                    <td class="num">{a.attempt}</td>
                    <td>
                      {a.worker_id === null ? (
                        <span class="muted">unknown</span>
                      ) : (
                        <a class="mono" href={routeHref({ page: 'workers' })} title={a.worker_id}>
                          {a.worker_id.slice(0, 8)}
                        </a>
                      )}
                    </td>
                    <td>
                      <Instant iso={a.started_at} now={now} />
                    </td>
                    <td>
                      <Instant iso={a.ended_at} now={now} />
                    </td>
                    <td class="num" data-testid="attempt-run-time" title={time?.spanMs == null ? undefined : `${formatDuration(time.spanMs)} from its start to ${state === 'ended' ? 'its end' : state === 'running' ? 'now' : 'its wait'}`}>
                      {time?.runningMs == null ? '–' : formatDuration(time.runningMs)}
                    </td>
                    <td>
                      <OutcomeBadge outcome={a.outcome} state={state} />
                    </td>
                    <td class="wrap attempt-error">{a.error ? <AttemptError error={a.error} /> : <span class="muted">–</span>}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </Section>
  );
}
