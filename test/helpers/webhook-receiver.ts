import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request the receiver got, with the outcome of verifying its signature. */
export interface ReceivedWebhook {
  path: string;
  id: string;
  timestamp: string;
  body: string;
  /** The parsed payload when the signature verified, else undefined. */
  payload: { type: string; timestamp: string; data: Record<string, unknown> } | undefined;
  verified: boolean;
  contentType: string | undefined;
  /** What the receiver answered. */
  status: number;
}

/**
 * A webhook receiver on 127.0.0.1: a real HTTP server that verifies every request's signature with
 * the `standardwebhooks` package and the secret registered for its path (`setSecret`, from the
 * subscription's answer), and answers what `respond` says (200 by default).
 */
export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  private readonly secrets = new Map<string, string>();
  private server: http.Server | undefined;
  private base = '';
  /** The status to answer a request with (its path and the number of requests with its webhook-id so far, from 1). */
  respond: (path: string, attempt: number) => number | Promise<number> = () => 200;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => void this.handle(req, Buffer.concat(chunks).toString('utf8'), res));
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The URL of a path of this receiver. */
  url(path: string): string {
    return `${this.base}${path}`;
  }

  setSecret(path: string, secret: string): void {
    this.secrets.set(path, secret);
  }

  /** Requests to `path` that verified, by payload. */
  verifiedAt(path: string): ReceivedWebhook[] {
    return this.received.filter((r) => r.path === path && r.verified);
  }

  private async handle(req: http.IncomingMessage, body: string, res: http.ServerResponse): Promise<void> {
    const path = req.url ?? '';
    const id = String(req.headers['webhook-id'] ?? '');
    const secret = this.secrets.get(path);
    let payload: ReceivedWebhook['payload'];
    try {
      payload = secret ? (new Webhook(secret).verify(body, req.headers as Record<string, string>) as ReceivedWebhook['payload']) : undefined;
    } catch {
      payload = undefined;
    }
    const attempt = this.received.filter((r) => r.id === id).length + 1;
    const status = await this.respond(path, attempt);
    this.received.push({ path, id, timestamp: String(req.headers['webhook-timestamp'] ?? ''), body, payload, verified: payload !== undefined, contentType: req.headers['content-type'], status });
    res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}
