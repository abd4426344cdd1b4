/** An execution's timeline as the detail page draws it: one row per durable operation, on the execution's time span. */
import type { Execution, Step } from '../client';
import { useFormatInstant } from './components';
import { formatDuration, formatRelative, previewJson } from '../domain/format';
import { buildTimeline, type TimelineEntry } from './timeline';

const KIND_LABEL: Record<TimelineEntry['kind'], string> = { step: 'step', sleep: 'sleep', event: 'event wait', child: 'child', patch: 'patch' };

function entryNote(e: TimelineEntry, now: number, formatInstant: (ms: number) => string): string {
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
  return e.state === 'completed' ? `→ ${previewJson(e.result, 60)}` : '';
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
        >
          <span class="tl-seq">{e.seq}</span>
          <span class={`tl-kind kind-${e.kind}`}>{KIND_LABEL[e.kind]}</span>
          <span class="tl-name mono" title={e.name}>
            {e.name}
          </span>
          <span class="tl-track" aria-hidden="true">
            <span class="tl-bar" style={{ left: `${e.offsetPct}%`, width: `${Math.min(e.widthPct, 100 - e.offsetPct)}%` }} />
          </span>
          <span class="tl-duration num" title={e.state === 'completed' ? 'duration' : 'so far'}>
            {formatDuration(e.durationMs)}
            {e.state !== 'completed' && <em> {e.state}</em>}
          </span>
          <span class="tl-note">{e.name === diverged?.name ? `diverged: the new code called ${diverged.called}` : entryNote(e, now, formatInstant)}</span>
        </li>
      ))}
    </ol>
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
