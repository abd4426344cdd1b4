import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

/**
 * Iterates `open(signal)` (the client's watch or watchChanges) while `enabled`, handing each item to
 * `onItem`; starts again when `deps` change and stops (closing the connection) on unmount. The
 * client reconnects by itself after network errors; `error` is what ended it otherwise (a 401, a 404).
 */
export function useStream<T>(open: (signal: AbortSignal) => AsyncIterable<T>, onItem: (item: T) => void, deps: readonly unknown[], enabled: boolean): { error: unknown } {
  const [error, setError] = useState<unknown>(undefined);
  const openRef = useRef(open);
  const onItemRef = useRef(onItem);
  openRef.current = open;
  onItemRef.current = onItem;
  useEffect(() => {
    setError(undefined);
    if (!enabled) return;
    const abort = new AbortController();
    void (async () => {
      try {
        for await (const item of openRef.current(abort.signal)) onItemRef.current(item);
      } catch (err) {
        if (!abort.signal.aborted) setError(err);
      }
    })();
    return () => abort.abort();
  }, [...deps, enabled]);
  return { error };
}

/**
 * A `reload` that runs at most once per `intervalMs` however many changes ask for it (the last ask
 * is never lost), and not at all while the tab is hidden: a hidden tab that was asked reloads once
 * when it is shown again.
 */
export function useThrottledReload(reload: () => void, intervalMs: number): () => void {
  const reloadRef = useRef(reload);
  reloadRef.current = reload;
  const state = useRef<{ last: number; timer: ReturnType<typeof setTimeout> | undefined; deferred: boolean }>({ last: 0, timer: undefined, deferred: false });
  useEffect(() => {
    const onVisible = () => {
      if (document.visibilityState !== 'visible' || !state.current.deferred) return;
      state.current.deferred = false;
      state.current.last = Date.now();
      reloadRef.current();
    };
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      document.removeEventListener('visibilitychange', onVisible);
      clearTimeout(state.current.timer);
    };
  }, []);
  return useCallback(() => {
    const s = state.current;
    if (s.timer !== undefined) return;
    s.timer = setTimeout(() => {
      s.timer = undefined;
      if (document.visibilityState === 'hidden') {
        s.deferred = true;
        return;
      }
      s.last = Date.now();
      reloadRef.current();
    }, Math.max(0, s.last + intervalMs - Date.now()));
  }, [intervalMs]);
}
