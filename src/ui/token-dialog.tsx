/** Asks for a bearer token after a 401; the token stays in this tab's sessionStorage only. */
import { useState } from 'preact/hooks';

export function TokenDialog({ rejected, onSubmit, onDismiss }: { rejected: boolean; onSubmit(token: string): void; onDismiss(): void }) {
  const [value, setValue] = useState('');
  return (
    <div class="overlay" role="dialog" aria-modal="true" aria-labelledby="token-title">
      <form
        class="dialog"
        data-testid="token-dialog"
        onSubmit={(e) => {
          e.preventDefault();
          if (value.trim()) onSubmit(value.trim());
        }}
      >
        <h2 id="token-title">Authentication required</h2>
        <p>{rejected ? 'The server rejected this token. Enter another one.' : 'This Stepwise server needs a bearer token.'}</p>
        <label class="field">
          <span>API token</span>
          <input type="password" name="token" autoComplete="off" autoFocus value={value} onInput={(e) => setValue(e.currentTarget.value)} data-testid="token-input" />
        </label>
        <p class="muted small">Kept only in this browser tab (sessionStorage) and sent as Authorization: Bearer.</p>
        <div class="actions">
          <button type="submit" class="primary" data-testid="token-submit">
            Use token
          </button>
          <button type="button" onClick={onDismiss}>
            Not now
          </button>
        </div>
      </form>
    </div>
  );
}
