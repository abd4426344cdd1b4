/** One Server-Sent Event: its type (`message` when the stream named none), its data, its id. */
export interface ServerSentEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/**
 * Reads a `text/event-stream` body as the HTML standard's event-stream format has it: lines end in
 * LF, CRLF or CR; a line `field: value` (one space after the colon is dropped), a line starting with
 * a colon is a comment (keep-alives), and a blank line sends the event gathered so far (one with no
 * `data` is not sent). `retry:` values go to `onRetry`. Written here rather than taken from a
 * package: the client's only dependency stays openapi-fetch, and the format fits in these lines.
 * Stopping early (break, return) cancels the body.
 */
export async function* readServerSentEvents(body: ReadableStream<Uint8Array>, onRetry: (ms: number) => void = () => undefined): AsyncGenerator<ServerSentEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  let event = '';
  let id: string | undefined;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      const ends = /\r\n|\r|\n/g;
      let start = 0;
      for (let m = ends.exec(buffer); m; m = ends.exec(buffer)) {
        // A CR at the end may be the first half of a CRLF that the next chunk completes.
        if (m[0] === '\r' && m.index === buffer.length - 1 && !done) break;
        const line = buffer.slice(start, m.index);
        start = ends.lastIndex;
        if (line === '') {
          if (data.length > 0) yield { event: event || 'message', data: data.join('\n'), id };
          data = [];
          event = '';
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = text;
        else if (field === 'data') data.push(text);
        else if (field === 'id' && !text.includes('\0')) id = text;
        else if (field === 'retry' && /^\d+$/.test(text)) onRetry(Number(text));
      }
      buffer = buffer.slice(start);
      if (done) return;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
