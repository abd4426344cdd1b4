/** Small shared pieces of the dashboard: status badges, times, JSON blocks, error boxes. */
import type { ComponentChildren } from 'preact';
import { StepwiseApiError, type ExecutionStatus } from '../client';
import { formatJson, formatRelative } from '../domain/format';
import { useApi } from './api-context';
import type { JsonProblem } from './json-input';
import { formatInstantIn } from './time-zone';

export function StatusBadge({ status }: { status: ExecutionStatus | string }) {
  return <span class={`status status-${status}`} data-status={status}>{status}</span>;
}

/** An execution's priority: 0 (the default) muted, any other value as a badge that stands out. */
export function Priority({ value }: { value: number }) {
  if (value === 0) return <span class="muted">0</span>;
  return <span class={`priority ${value > 0 ? 'priority-high' : 'priority-low'}`}>{value}</span>;
}

/** Formats an instant (ISO or epoch ms) in the zone the operator chose in the header. */
export function useFormatInstant(): (instant: string | number | null | undefined) => string {
  const { timeZone } = useApi();
  return (instant) => formatInstantIn(instant, timeZone);
}

/** An instant in the chosen zone with the relative time as a tooltip (or the other way round with `relative`). */
export function Instant({ iso, now, relative = false }: { iso: string | null | undefined; now: number; relative?: boolean }) {
  const format = useFormatInstant();
  if (!iso) return <span class="muted">–</span>;
  const abs = format(iso);
  const rel = formatRelative(Date.parse(iso), now);
  return <time dateTime={iso} title={relative ? abs : rel}>{relative ? rel : abs}</time>;
}

/** Tags as chips; each a link when `href` is given (the list filtered by it). */
export function TagChips({ tags, href }: { tags: readonly string[]; href?: (tag: string) => string }) {
  if (tags.length === 0) return <span class="muted">–</span>;
  return (
    <span class="tags" data-testid="tags">
      {tags.map((tag) =>
        href ? (
          <a key={tag} class="chip tag" href={href(tag)} title={`Executions tagged ${tag}`}>
            {tag}
          </a>
        ) : (
          <span key={tag} class="chip tag">
            {tag}
          </span>
        ),
      )}
    </span>
  );
}

export function JsonBlock({ value, testId }: { value: unknown; testId?: string }) {
  return <pre class="json" data-testid={testId}>{formatJson(value)}</pre>;
}

/** A card with a heading; `aside` sits at the heading's right (a card's own action). */
export function Section({ title, aside, children, testId }: { title: ComponentChildren; aside?: ComponentChildren; children: ComponentChildren; testId?: string }) {
  return (
    <section class="card" data-testid={testId}>
      {aside ? (
        <div class="card-head">
          <h2>{title}</h2>
          {aside}
        </div>
      ) : (
        <h2>{title}</h2>
      )}
      {children}
    </section>
  );
}

/** An error answer as the envelope gave it: code, message, the failed checks and the request id. */
export function ApiErrorBox({ error, testId = 'api-error' }: { error: unknown; testId?: string }) {
  if (!error) return null;
  if (error instanceof StepwiseApiError) {
    return (
      <div class="error-box" role="alert" data-testid={testId}>
        <strong>{error.code}</strong> ({error.status}): {error.message}
        {error.details && error.details.length > 0 && (
          <ul>
            {error.details.map((d) => (
              <li key={`${d.path}:${d.message}`}>
                <code>{d.path}</code> {d.message}
              </li>
            ))}
          </ul>
        )}
        {error.requestId && <div class="muted small">request id {error.requestId}</div>}
      </div>
    );
  }
  const message = error instanceof TypeError ? `The server cannot be reached (${error.message}).` : String((error as Error).message ?? error);
  return (
    <div class="error-box" role="alert" data-testid={testId}>
      {message}
    </div>
  );
}

/** A textarea for JSON with the problems the browser-side check found listed under it. */
export function JsonEditor(props: {
  label: string;
  value: string;
  onInput(text: string): void;
  problems: JsonProblem[];
  testId: string;
  rows?: number;
  /** Shown while the editor is empty; never sent. */
  placeholder?: string;
}) {
  const invalid = props.problems.length > 0;
  return (
    <label class="field">
      <span>{props.label}</span>
      <textarea
        class={invalid ? 'json-input invalid' : 'json-input'}
        rows={props.rows ?? 6}
        spellcheck={false}
        value={props.value}
        placeholder={props.placeholder}
        aria-invalid={invalid}
        data-testid={props.testId}
        onInput={(e) => props.onInput(e.currentTarget.value)}
      />
      {invalid && (
        <ul class="problems" data-testid={`${props.testId}-problems`}>
          {props.problems.map((p) => (
            <li key={`${p.path}:${p.message}`}>
              {p.path && <code>{p.path}</code>} {p.message}
            </li>
          ))}
        </ul>
      )}
    </label>
  );
}
