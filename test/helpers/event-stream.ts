/** One Server-Sent Event as it came over the wire. */
export interface WireEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/**
 * An event stream read with fetch, as a test sees it: the raw text, each event in order, comments,
 * and whether the server ended it. `next()` waits for the next event (failing after `timeoutMs`).
 */
export interface OpenedStream {
  response: Response;
  text(): string;
  events: WireEvent[];
  comments: string[];
  /** Waits for the next event not yet taken by next(). */
  next(timeoutMs?: number): Promise<WireEvent>;
  /** Resolves when the server ends the stream (true) or the connection breaks (false). */
  ended: Promise<boolean>;
  /** Hangs up. */
  close(): void;
}

/** Opens `url` with fetch and parses what arrives as Server-Sent Events (a non-2xx answer is returned unread). */
export async function openEventStream(url: string, headers: Record<string, string> = {}): Promise<OpenedStream> {
  const abort = new AbortController();
  const response = await fetch(url, { headers, signal: abort.signal });
  const events: WireEvent[] = [];
  const comments: string[] = [];
  let raw = '';
  let taken = 0;
  const waiters: Array<() => void> = [];
  const wake = () => waiters.splice(0).forEach((w) => w());
  let buffer = '';
  let current: WireEvent = { event: 'message', data: '', id: undefined };
  let hasData = false;
  const ended = (async () => {
    if (!response.ok || !response.body) return true;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return true;
        const chunk = decoder.decode(value, { stream: true });
        raw += chunk;
        buffer += chunk;
        let nl: number;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (line === '') {
            if (hasData) events.push(current);
            current = { event: 'message', data: '', id: undefined };
            hasData = false;
            wake();
          } else if (line.startsWith(':')) comments.push(line.slice(1).trim());
          else {
            const colon = line.indexOf(':');
            const field = line.slice(0, colon);
            const value = line.slice(colon + 1).replace(/^ /, '');
            if (field === 'event') current.event = value;
            else if (field === 'data') {
              current.data = hasData ? `${current.data}\n${value}` : value;
              hasData = true;
            } else if (field === 'id') current.id = value;
          }
        }
      }
    } catch {
      return false;
    } finally {
      wake();
    }
  })();
  let finished = false;
  void ended.then(() => {
    finished = true;
    wake();
  });
  return {
    response,
    text: () => raw,
    events,
    comments,
    ended,
    close: () => abort.abort(),
    async next(timeoutMs = 10000) {
      const deadline = Date.now() + timeoutMs;
      while (taken >= events.length) {
        if (finished) throw new Error(`the stream ended after ${events.length} events: ${raw.slice(-500)}`);
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no event within ${timeoutMs} ms (had ${events.length}): ${raw.slice(-500)}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      return events[taken++];
    },
  };
}
