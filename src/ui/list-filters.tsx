/**
 * The executions list's second row of filters: a search box (an execution id opens it; anything else,
 * or an id no execution has, is an idempotency key), tags, and a creation-time range in the chosen zone.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { StepwiseApiError } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox } from './components';
import { browserTimeZoneName } from './preferences';
import { looksLikeExecutionId, parseTags, routeHref, withFilter, type ListFilter } from './routes';
import { fromDateTimeInput, toDateTimeInput } from './time-zone';

/** What a text input holds: the operator's typing, replaced when `value` (from the URL) changes. */
function useDraft(value: string): [string, (text: string) => void] {
  const [draft, setDraft] = useState(value);
  const last = useRef(value);
  // Effects run a frame after mounting: by then the operator may have typed, so only a change of
  // `value` itself replaces the draft.
  useEffect(() => {
    if (last.current === value) return;
    last.current = value;
    setDraft(value);
  }, [value]);
  return [draft, setDraft];
}

function SearchBox({ filter }: { filter: ListFilter }) {
  const { client, navigate } = useApi();
  const [text, setText] = useDraft(filter.idempotencyKey ?? '');
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  useAuthPrompt(error);
  const search = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    const query = text.trim();
    // A key names at most one execution: the other filters would only hide it.
    const byKey = (key: string | undefined) => navigate(routeHref({ page: 'executions', filter: { offset: 0, limit: filter.limit, idempotencyKey: key } }));
    if (!query) return byKey(undefined);
    if (looksLikeExecutionId(query)) {
      setBusy(true);
      try {
        const found = await client.get(query.toLowerCase());
        return navigate(routeHref({ page: 'execution', id: found.execution_id }));
      } catch (err) {
        // No execution has this id: a UUID is a common idempotency key, so look for it as one.
        if (!(err instanceof StepwiseApiError && err.status === 404)) return setError(err);
      } finally {
        setBusy(false);
      }
    }
    byKey(query);
  };
  return (
    <form class="search" role="search" onSubmit={search}>
      <input
        type="text"
        maxLength={255}
        placeholder="Execution id or idempotency key"
        aria-label="Find an execution by id or idempotency key"
        value={text}
        onInput={(e) => setText(e.currentTarget.value)}
        data-testid="search-input"
      />
      <button type="submit" disabled={busy} data-testid="search-submit">
        Find
      </button>
      <ApiErrorBox error={error} testId="search-error" />
    </form>
  );
}

function TagsInput({ filter }: { filter: ListFilter }) {
  const { navigate } = useApi();
  const [text, setText] = useDraft((filter.tags ?? []).join(', '));
  const apply = () => navigate(routeHref(withFilter(filter, { tags: parseTags([text]) })));
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        apply();
      }}
    >
      <label class="field inline" title="Executions that carry every one of these tags (comma-separated)">
        <span>Tags</span>
        <input type="text" class="tags-input" placeholder="eu, vip" value={text} onInput={(e) => setText(e.currentTarget.value)} onChange={apply} data-testid="filter-tags" />
      </label>
    </form>
  );
}

function CreatedInput({ filter, bound }: { filter: ListFilter; bound: 'createdAfter' | 'createdBefore' }) {
  const { navigate, timeZone } = useApi();
  const label = bound === 'createdAfter' ? 'Created from' : 'Created before';
  const title = bound === 'createdAfter' ? 'Executions created at or after this time' : 'Executions created before this time (exclusive)';
  return (
    <label class="field inline" title={title}>
      <span>{label}</span>
      <input
        type="datetime-local"
        value={toDateTimeInput(filter[bound], timeZone)}
        onChange={(e) => {
          const instant = fromDateTimeInput(e.currentTarget.value, timeZone);
          navigate(routeHref(withFilter(filter, bound === 'createdAfter' ? { createdAfter: instant } : { createdBefore: instant })));
        }}
        data-testid={bound === 'createdAfter' ? 'filter-created-after' : 'filter-created-before'}
      />
    </label>
  );
}

export function ListFilters({ filter }: { filter: ListFilter }) {
  const { timeZone } = useApi();
  const zone = timeZone === 'utc' ? 'UTC' : (browserTimeZoneName() ?? 'local time');
  return (
    <div class="toolbar filters">
      <SearchBox filter={filter} />
      {filter.idempotencyKey && (
        <span class="chip" data-testid="filter-key">
          idempotency key <span class="mono">{filter.idempotencyKey}</span>{' '}
          <a href={routeHref(withFilter(filter, { idempotencyKey: undefined }))} title="Show all executions">
            ✕
          </a>
        </span>
      )}
      <TagsInput filter={filter} />
      <CreatedInput filter={filter} bound="createdAfter" />
      <CreatedInput filter={filter} bound="createdBefore" />
      <span class="muted small" data-testid="filter-zone">
        {zone}
      </span>
    </div>
  );
}
