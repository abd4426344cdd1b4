import { useEffect, useRef, useState } from 'preact/hooks';

export interface Polled<T> {
  data: T | undefined;
  error: unknown;
  /** Date.now() of the last successful load. */
  loadedAt: number | undefined;
  /** Loads again at once (after an action). */
  reload(): void;
}

/**
 * Loads with `load` when `deps` change, then again `intervalMs` after each load finishes while
 * `enabled`: requests never overlap, and a slow server slows the refresh rather than piling up calls.
 * Answers for outdated deps are dropped; a hidden tab skips its refreshes.
 */
export function usePolling<T>(load: () => Promise<T>, deps: readonly unknown[], options: { intervalMs: number; enabled: boolean }): Polled<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loadedAt?: number; key: unknown[] }>({ key: [] });
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const key = [...deps];
    const run = async (first = false) => {
      // A background tab (an operator's forgotten dashboard) asks nothing until it is shown again.
      if (!first && document.visibilityState === 'hidden') {
        timer = setTimeout(run, options.intervalMs);
        return;
      }
      try {
        const data = await loadRef.current();
        if (!stopped) setState({ data, error: undefined, loadedAt: Date.now(), key });
      } catch (error) {
        if (!stopped) setState((s) => ({ ...s, error, key }));
      }
      if (!stopped && options.enabled) timer = setTimeout(run, options.intervalMs);
    };
    void run(true);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [...deps, tick, options.enabled, options.intervalMs]);
  const current = state.key.length === deps.length && state.key.every((v, i) => Object.is(v, deps[i]));
  return {
    data: current ? state.data : undefined,
    error: current ? state.error : undefined,
    loadedAt: current ? state.loadedAt : undefined,
    reload: () => setTick((t) => t + 1),
  };
}
