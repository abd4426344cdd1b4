/** The dashboard shell: navigation, hash routing, the auto-refresh and time-zone switches, and the token dialog. */
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import { createStepwiseClient } from '../client';
import { ApiContext, type Api } from './api-context';
import { ExecutionPage } from './execution-page';
import { ExecutionsPage } from './executions-page';
import { browserTimeZoneName, readTimeZone, saveTimeZone } from './preferences';
import { parseRoute } from './routes';
import { readToken, saveToken } from './session';
import { TasksPage } from './tasks-page';
import { isTimeZoneChoice, type TimeZoneChoice } from './time-zone';
import { TokenDialog } from './token-dialog';
import { WebhooksPage } from './webhooks-page';
import { WorkersPage } from './workers-page';

function useHash(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return hash;
}

/** UTC or the browser's zone, for every instant the dashboard shows and every date it is given. */
function TimeZoneSwitch({ value, onChange }: { value: TimeZoneChoice; onChange(zone: TimeZoneChoice): void }) {
  const local = browserTimeZoneName();
  return (
    <label class="switch" title="The time zone of every time shown, and of the dates you type; remembered in this browser">
      Times{' '}
      <select
        class="dark"
        data-testid="time-zone"
        value={value}
        onChange={(e) => {
          const zone = e.currentTarget.value;
          if (isTimeZoneChoice(zone)) onChange(zone);
        }}
      >
        <option value="utc">UTC</option>
        <option value="local">{local ? `Local (${local})` : 'Local'}</option>
      </select>
    </label>
  );
}

export function App({ basePath }: { basePath: string }) {
  const hash = useHash();
  const route = parseRoute(hash);
  const [token, setToken] = useState(readToken);
  const [asking, setAsking] = useState(false);
  const [autoRefresh, setAutoRefresh] = useState(true);
  const [timeZone, setTimeZone] = useState(readTimeZone);
  const client = useMemo(() => createStepwiseClient({ baseUrl: `${location.origin}${basePath}`, token }), [basePath, token]);
  const requestToken = useCallback(() => setAsking(true), []);
  const api: Api = useMemo(
    () => ({ client, basePath, autoRefresh, timeZone, requestToken, navigate: (h: string) => void (location.hash = h) }),
    [client, basePath, autoRefresh, timeZone, requestToken],
  );
  const chooseTimeZone = (zone: TimeZoneChoice) => {
    saveTimeZone(zone);
    setTimeZone(zone);
  };
  const applyToken = (value: string | undefined) => {
    saveToken(value);
    setToken(value);
    setAsking(false);
  };
  const tab = route.page === 'tasks' || route.page === 'workers' || route.page === 'webhooks' ? route.page : 'executions';
  return (
    <ApiContext.Provider value={api}>
      <header class="topbar">
        <a class="brand" href="#/executions">
          Stepwise
        </a>
        <nav>
          <a href="#/executions" class={tab === 'executions' ? 'active' : ''}>
            Executions
          </a>
          <a href="#/tasks" class={tab === 'tasks' ? 'active' : ''}>
            Tasks
          </a>
          <a href="#/workers" class={tab === 'workers' ? 'active' : ''}>
            Workers
          </a>
          <a href="#/webhooks" class={tab === 'webhooks' ? 'active' : ''} data-testid="webhooks-link">
            Webhooks
          </a>
          <a href={`${basePath}/docs`} data-testid="docs-link">
            API reference
          </a>
          <a href={`${basePath}/docs/guides/`} data-testid="guides-link">
            Guides
          </a>
        </nav>
        <div class="spacer" />
        <TimeZoneSwitch value={timeZone} onChange={chooseTimeZone} />
        <label class="switch" title="Follow changes as they happen: the open execution live, lists when their executions change status (and every 10 seconds)">
          <input type="checkbox" checked={autoRefresh} onChange={(e) => setAutoRefresh(e.currentTarget.checked)} data-testid="auto-refresh" /> Auto-refresh
        </label>
        {token && (
          <button type="button" class="link" onClick={() => applyToken(undefined)}>
            Forget token
          </button>
        )}
      </header>
      <main>
        {route.page === 'executions' && <ExecutionsPage filter={route.filter} />}
        {route.page === 'execution' && <ExecutionPage key={route.id} id={route.id} />}
        {route.page === 'tasks' && <TasksPage />}
        {route.page === 'workers' && <WorkersPage />}
        {route.page === 'webhooks' && <WebhooksPage selectedId={route.id} />}
      </main>
      {asking && <TokenDialog rejected={token !== undefined} onSubmit={applyToken} onDismiss={() => setAsking(false)} />}
    </ApiContext.Provider>
  );
}
