/** The dashboard shell: navigation, hash routing, the auto-refresh switch and the token dialog. */
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import { createStepwiseClient } from '../client';
import { ApiContext, type Api } from './api-context';
import { ExecutionPage } from './execution-page';
import { ExecutionsPage } from './executions-page';
import { parseRoute } from './routes';
import { readToken, saveToken } from './session';
import { TasksPage } from './tasks-page';
import { TokenDialog } from './token-dialog';
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

export function App({ basePath }: { basePath: string }) {
  const hash = useHash();
  const route = parseRoute(hash);
  const [token, setToken] = useState(readToken);
  const [asking, setAsking] = useState(false);
  const [autoRefresh, setAutoRefresh] = useState(true);
  const client = useMemo(() => createStepwiseClient({ baseUrl: `${location.origin}${basePath}`, token }), [basePath, token]);
  const requestToken = useCallback(() => setAsking(true), []);
  const api: Api = useMemo(
    () => ({ client, basePath, autoRefresh, requestToken, navigate: (h: string) => void (location.hash = h) }),
    [client, basePath, autoRefresh, requestToken],
  );
  const applyToken = (value: string | undefined) => {
    saveToken(value);
    setToken(value);
    setAsking(false);
  };
  const tab = route.page === 'tasks' || route.page === 'workers' ? route.page : 'executions';
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
          <a href={`${basePath}/docs`} data-testid="docs-link">
            API reference
          </a>
        </nav>
        <div class="spacer" />
        <label class="switch" title="Refresh lists and the open execution every 2 seconds">
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
      </main>
      {asking && <TokenDialog rejected={token !== undefined} onSubmit={applyToken} onDismiss={() => setAsking(false)} />}
    </ApiContext.Provider>
  );
}
