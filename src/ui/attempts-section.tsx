/** An execution's attempts: which worker ran each, when, how it ended, and why it failed (the stack folded). */
import type { Attempt } from '../client';
import { elapsedMs, formatDuration } from '../domain/format';
import { Instant, Section, StatusBadge } from './components';
import { routeHref } from './routes';

/** An attempt still in progress has no outcome yet. */
function OutcomeBadge({ outcome }: { outcome: Attempt['outcome'] }) {
  return outcome === null ? <StatusBadge status="running" /> : <StatusBadge status={outcome} />;
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

export function AttemptsSection({ attempts, now }: { attempts: Attempt[]; now: number }) {
  return (
    <Section title={`Attempts (${attempts.length})`} testId="attempts-section">
      {attempts.length === 0 ? (
        <p class="muted">No worker has claimed it yet.</p>
      ) : (
        <table class="attempts">
          <thead>
            <tr>
              <th class="num">#</th>
              <th>Worker</th>
              <th>Started</th>
              <th>Ended</th>
              <th class="num">Duration</th>
              <th>Outcome</th>
              <th>Error</th>
            </tr>
          </thead>
          <tbody>
            {attempts.map((a) => {
              const ran = elapsedMs(a.started_at, a.ended_at, now);
              return (
                <tr key={a.attempt} data-testid="attempt-row" data-attempt={a.attempt} data-outcome={a.outcome ?? 'running'}>
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
                  <td class="num" title={a.ended_at === null ? 'so far' : 'duration'}>
                    {ran === null ? '–' : formatDuration(ran)}
                  </td>
                  <td>
                    <OutcomeBadge outcome={a.outcome} />
                  </td>
                  <td class="wrap attempt-error">{a.error ? <AttemptError error={a.error} /> : <span class="muted">–</span>}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </Section>
  );
}
