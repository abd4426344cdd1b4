/** An execution's timeline as the detail page draws it: one row per durable operation, on the execution's time span. */
import type { Execution, Step } from '../client';
import { useFormatInstant } from './components';
import { formatDuration, formatRelative, previewJson } from '../domain/format';
import { buildTimeline, type TimelineEntry } from './timeline';

const KIND_LABEL: Record<TimelineEntry['kind'], string> = { step: 'step', sleep: 'sleep', event: 'event wait', child: 'child', patch: 'patch' };

function entryNote(e: TimelineEntry, now: number, formatInstant: (ms: number) => string): string {
  if (e.state === 'failed' && e.error) return `${e.error.type}: ${e.error.message}`;
  // A patch marker is recorded only when ctx.patched answered true; its name is the change id.
  if (e.kind === 'patch') return 'took the new path';
  if (e.kind === 'sleep') {
    if (e.state === 'sleeping' && e.deadlineMs !== null) return `until ${formatInstant(e.deadlineMs)} (${formatRelative(e.deadlineMs, now)})`;
    return e.state === 'completed' ? 'woke up' : '';
  }
  if (e.kind === 'event') {
    if (e.state === 'waiting') return e.deadlineMs === null ? 'no timeout' : `times out ${formatRelative(e.deadlineMs, now)}`;
    if (e.timedOut) return 'timed out';
    if (e.state === 'completed') return `payload ${previewJson((e.result as { payload?: unknown } | null)?.payload, 60)}`;
    return '';
  }
  if (e.kind === 'child') {
    const child = (e.result ?? {}) as { execution_id?: string; status?: string; output?: unknown; error?: { message?: string } | null; timed_out?: boolean };
    if (child.timed_out) return `${child.execution_id ?? ''} timed out`;
    if (child.status === 'completed') return `${child.execution_id ?? ''} completed → ${previewJson(child.output, 40)}`;
    if (child.status) return `${child.execution_id ?? ''} ${child.status}${child.error?.message ? `: ${child.error.message}` : ''}`;
    return child.execution_id ?? '';
  }
  if (e.state !== 'completed') return '';
  const retried = e.failures === 0 ? '' : ` (after ${e.failures === 1 ? '1 failed attempt' : `${e.failures} failed attempts`})`;
  return `→ ${previewJson(e.result, 60)}${retried}`;
}

export function Timeline({ execution, steps, now }: { execution: Execution; steps: Step[]; now: number }) {
  const formatInstant = useFormatInstant();
  if (steps.length === 0) return <p class="muted">No steps recorded yet.</p>;
  const timeline = buildTimeline(execution, steps, now);
  const diverged = divergedAt(execution);
  return (
    <ol class="timeline" data-testid="timeline">
      {timeline.entries.map((e) => (
        <li
          key={e.seq}
          class={`tl-row tl-${e.kind} tl-${e.state}${e.name === diverged?.name ? ' tl-diverged' : ''}`}
          data-testid="timeline-entry"
          data-kind={e.kind}
          data-state={e.state}
          data-diverged={e.name === diverged?.name ? 'true' : undefined}
          title={e.error ? `${e.state === 'failed' ? 'Failed' : 'Last failure'}: ${e.error.message}` : undefined}
        >
          <span class="tl-seq">{e.seq}</span>
          <span class={`tl-kind kind-${e.kind}`}>{KIND_LABEL[e.kind]}</span>
          <span class="tl-name mono" title={e.name}>
            {e.name}
          </span>
          <span class="tl-track" aria-hidden="true">
            <span class="tl-bar" style={{ left: `${e.offsetPct}%`, width: `${Math.min(e.widthPct, 100 - e.offsetPct)}%` }} />
          </span>
          <span class="tl-duration num" title={e.state === 'completed' || e.state === 'failed' ? 'duration' : 'so far'}>
            {formatDuration(e.durationMs)}
            {e.state !== 'completed' && <em> {e.state}</em>}
          </span>
          <span class="tl-note">{e.name === diverged?.name ? `diverged: the new code called ${diverged.called}` : entryNote(e, now, formatInstant)}</span>
          {e.error && <StepError entry={e} />}
        </li>
      ))}
    </ol>
  );
}

/**
 * A step's error under its row, on every screen width (the note column folds away on narrow ones):
 * the message in the summary, the whole of it when opened (a summary line is cut at the row's end).
 */
function StepError({ entry }: { entry: TimelineEntry }) {
  const error = entry.error as NonNullable<TimelineEntry['error']>;
  const failed = entry.state === 'failed';
  return (
    <details class={`tl-error${failed ? ' failed' : ''}`} data-testid="timeline-error">
      <summary>
        {failed ? 'Failed' : 'Last failure'}
        {': '}
        <span data-testid="timeline-error-message">
          {error.type}: {error.message}
        </span>
      </summary>
      <p class="small">
        {entry.failures === 1 ? '1 failed attempt' : `${entry.failures} failed attempts`} of this step; every attempt of the execution, with its stack,
        is under Attempts below.
      </p>
      <pre class="json">{error.message}</pre>
    </details>
  );
}

/**
 * The recorded operation a replay diverged at, to mark in the timeline: found by name, which is
 * unique in a history (a repeated name gets a counter), since its kind may read `invoke` where the
 * step list says `child`.
 */
function divergedAt(x: Execution): { name: string; called: string } | null {
  const d = x.error?.divergence;
  return d?.recorded ? { name: d.recorded.name, called: `${d.called.kind} “${d.called.name}”` } : null;
}
