import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import type { AttemptResult } from '../store/webhook-deliveries';
import { assertLiteralTargetAllowed, guardedLookup, TargetRefusedError, type TargetPolicy } from './targets';

export interface SenderOptions {
  policy: TargetPolicy;
  /** The whole attempt's limit: lookup, connect, request and the answer's headers. */
  timeoutMs: number;
}

const USER_AGENT = 'Stepwise-Webhooks/1';

/** An error's line for the delivery log: its code and message, bounded; never a stack. */
function describeFailure(err: unknown, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `timed out after ${timeoutMs} ms`;
  if (err instanceof TargetRefusedError) return `refused target: ${err.message}`.slice(0, 500);
  const e = err as NodeJS.ErrnoException;
  const text = e.code && !e.message.includes(e.code) ? `${e.code}: ${e.message}` : e.message;
  return (text || String(err)).slice(0, 500);
}

/**
 * POSTs deliveries over node:http(s) with keep-alive agents. Every new connection resolves its host
 * through guardedLookup, so the address it connects to is the one checked; address literals are
 * checked before the request (they are connected to without a lookup). Redirects are not followed: a
 * 3xx is a failed attempt like any other non-2xx answer.
 */
export class WebhookSender {
  private readonly lookup: net.LookupFunction;
  private readonly httpAgent = new http.Agent({ keepAlive: true });
  private readonly httpsAgent = new https.Agent({ keepAlive: true });

  constructor(private readonly options: SenderOptions) {
    this.lookup = guardedLookup(options.policy);
  }

  /** One attempt: resolves with what came of it, never rejects. Done once the answer's headers arrive. */
  send(url: string, body: string, headers: Record<string, string>): Promise<AttemptResult> {
    const { timeoutMs, policy } = this.options;
    const started = performance.now();
    const elapsed = () => Math.max(0, Math.round(performance.now() - started));
    const signal = AbortSignal.timeout(timeoutMs);
    let target: URL;
    try {
      target = new URL(url);
      assertLiteralTargetAllowed(target, policy);
    } catch (err) {
      return Promise.resolve({ delivered: false, statusCode: null, latencyMs: elapsed(), error: describeFailure(err, false, timeoutMs) });
    }
    const isHttps = target.protocol === 'https:';
    return new Promise((resolve) => {
      let settled = false;
      const settle = (result: AttemptResult) => {
        if (settled) return;
        settled = true;
        resolve(result);
      };
      const request = (isHttps ? https : http).request(
        target,
        {
          method: 'POST',
          agent: isHttps ? this.httpsAgent : this.httpAgent,
          lookup: this.lookup,
          signal,
          headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': USER_AGENT },
        },
        (response) => {
          const code = response.statusCode ?? 0;
          const latencyMs = elapsed();
          // The body is not read, only drained so the connection can serve the next delivery (the
          // timeout's signal still bounds it).
          response.on('error', () => undefined);
          response.resume();
          settle(code >= 200 && code < 300 ? { delivered: true, statusCode: code, latencyMs, error: null } : { delivered: false, statusCode: code, latencyMs, error: `answered ${code}` });
        },
      );
      request.on('error', (err) => settle({ delivered: false, statusCode: null, latencyMs: elapsed(), error: describeFailure(err, signal.aborted, timeoutMs) }));
      request.end(body);
    });
  }

  /** Closes the kept-alive connections. */
  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}
