/** Delivers a named event to a waiting execution, its payload checked in the browser first. */
import { useState } from 'preact/hooks';
import type { Execution, Task } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox, JsonEditor, Section } from './components';
import { formatJson } from '../domain/format';
import { checkJson, skeletonFromSchema, type JsonProblem } from './json-input';

/** The events one can send: the one awaited now first, then every event the task declared. */
function eventNames(execution: Execution, task: Task | undefined): string[] {
  const awaited = execution.waiting_for_event?.event_name;
  const declared = Object.keys(task?.event_schemas ?? {}).sort();
  return [...new Set([...(awaited ? [awaited] : []), ...declared])];
}

/**
 * `onDelivered` gets the confirmation to show, and undefined when the operator edits or sends again.
 * The page shows it, not the form: an execution that finishes at once (its handler resumed and
 * returned before the page reloaded) takes the form away with it, and the confirmation must stay.
 */
export function EventForm({ execution, task, onDelivered }: { execution: Execution; task: Task | undefined; onDelivered(message: string | undefined): void }) {
  const { client } = useApi();
  const names = eventNames(execution, task);
  // Derived in render, not set by effects: the form never shows a name it is about to replace, so
  // nothing overwrites what the operator has begun to type. Until the operator picks an event, the form
  // follows the awaited one. The payload starts empty, its schema's shape as a placeholder: a value
  // filled in for the operator (`"approved": false`) would be one click from deciding for them.
  const [picked, setPicked] = useState<string | undefined>(undefined);
  const name = picked !== undefined && names.includes(picked) ? picked : (names[0] ?? '');
  const schema = task?.event_schemas?.[name];
  const [draft, setDraft] = useState<string | undefined>(undefined);
  const text = draft ?? '';
  const empty = text.trim() === '';
  const [problems, setProblems] = useState<JsonProblem[]>([]);
  const [serverError, setServerError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  useAuthPrompt(serverError);

  if (names.length === 0) return null;
  const edit = (value: string) => {
    setDraft(value);
    onDelivered(undefined);
    const check = checkJson(value, schema);
    setProblems(check.ok ? [] : check.problems);
  };
  const send = async (e: Event) => {
    e.preventDefault();
    setServerError(undefined);
    onDelivered(undefined);
    const check = checkJson(text, schema);
    if (!check.ok) {
      setProblems(check.problems);
      return;
    }
    setProblems([]);
    setBusy(true);
    try {
      const answer = await client.sendEvent(execution.execution_id, name, check.value);
      setDraft(undefined);
      onDelivered(`Delivered “${answer.event_name}”; the execution is ${answer.execution_status}.`);
    } catch (err) {
      setServerError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Section title="Deliver an event" testId="event-form">
      <form onSubmit={send}>
        <label class="field inline">
          <span>Event</span>
          <select
            data-testid="event-name"
            value={name}
            onChange={(e) => {
              setPicked(e.currentTarget.value);
              setDraft(undefined);
              setProblems([]);
            }}
          >
            {names.map((n) => (
              <option key={n} value={n}>
                {n}
                {n === execution.waiting_for_event?.event_name ? ' (awaited now)' : ''}
              </option>
            ))}
          </select>
        </label>
        {schema !== undefined ? (
          <details class="schema">
            <summary>Payload schema</summary>
            <pre class="json">{formatJson(schema)}</pre>
          </details>
        ) : (
          <p class="muted small">The task declared no schema for this event: any JSON value is accepted.</p>
        )}
        <JsonEditor
          label="Payload (JSON)"
          value={text}
          onInput={edit}
          problems={problems}
          testId="event-payload"
          placeholder={schema !== undefined ? skeletonFromSchema(schema) : 'Any JSON value, such as null or {"ok": true}'}
        />
        <div class="actions">
          <button type="submit" class="primary" data-testid="send-event" disabled={busy || empty} title={empty ? 'Type the payload first: nothing is filled in for you' : undefined}>
            Deliver event
          </button>
          {empty && <span class="muted small">The grey text is the shape the task expects; type the payload to send.</span>}
        </div>
        <ApiErrorBox error={serverError} testId="event-error" />
      </form>
    </Section>
  );
}
