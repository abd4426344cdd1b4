import net from 'node:net';
import { findFreePort } from '../../src/store/embedded';

/** A TCP forwarder that can be switched off and on, or made silent, to make the database unreachable or mute and bring it back. */
export interface TcpProxy {
  port: number;
  /** Rewrites a PostgreSQL URL to go through the proxy. */
  urlThrough(url: string): string;
  /** Starts accepting connections (on the same port every time). */
  start(): Promise<void>;
  /** Refuses new connections and cuts the open ones, as a database crash would. */
  stop(): Promise<void>;
  /**
   * Goes silent, as a hung database, pooler or load balancer does: connections are still accepted
   * and kept open, but nothing is forwarded either way, and TCP itself stays healthy (keep-alive
   * probes are answered). Bytes sent meanwhile are held; a connection whose client closes while the
   * proxy is silent is dropped with what it held, its server side closed without them.
   */
  silence(): void;
  /** Forwards again: what connections still open sent while silent is delivered, in order. */
  forward(): void;
  /** Connections open through the proxy, and bytes held for them while silent. */
  readonly held: { connections: number; bytes: number };
}

/** One client connection and its server side, with what each sent while the proxy was silent. */
interface Pair {
  client: net.Socket;
  upstream: net.Socket | undefined;
  toServer: Buffer[];
  toClient: Buffer[];
  upstreamEnded: boolean;
}

export async function createTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const port = await findFreePort();
  const pairs = new Set<Pair>();
  let server: net.Server | undefined;
  let silent = false;

  const drop = (pair: Pair) => {
    pair.client.destroy();
    pair.upstream?.destroy();
    pair.toServer = [];
    pair.toClient = [];
    pairs.delete(pair);
  };
  /** Writes `data` to `to`, pausing `from` while `to` is full. */
  const send = (from: net.Socket | undefined, to: net.Socket, data: Buffer) => {
    if (!to.write(data) && from) {
      from.pause();
      to.once('drain', () => from.resume());
    }
  };
  const connectUpstream = (pair: Pair) => {
    const upstream = net.connect(target.port, target.host);
    pair.upstream = upstream;
    upstream.on('data', (d: Buffer) => (silent ? pair.toClient.push(d) : send(upstream, pair.client, d)));
    upstream.on('error', () => undefined);
    // The server closing while the proxy is silent reaches the client only once it forwards again.
    upstream.on('close', () => {
      pair.upstreamEnded = true;
      if (!silent) drop(pair);
    });
    for (const d of pair.toServer.splice(0)) send(pair.client, upstream, d);
  };

  return {
    port,
    urlThrough(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    async start() {
      if (server) return;
      server = net.createServer((client) => {
        const pair: Pair = { client, upstream: undefined, toServer: [], toClient: [], upstreamEnded: false };
        pairs.add(pair);
        client.on('data', (d: Buffer) => (silent || !pair.upstream ? pair.toServer.push(d) : send(client, pair.upstream, d)));
        client.on('error', () => undefined);
        client.on('close', () => drop(pair));
        if (!silent) connectUpstream(pair);
      });
      const s = server;
      await new Promise<void>((resolve, reject) => s.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
    },
    async stop() {
      const s = server;
      server = undefined;
      for (const pair of [...pairs]) drop(pair);
      if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
    },
    silence() {
      silent = true;
    },
    forward() {
      silent = false;
      for (const pair of [...pairs]) {
        if (!pair.upstream) {
          connectUpstream(pair);
          continue;
        }
        for (const d of pair.toServer.splice(0)) send(pair.client, pair.upstream, d);
        for (const d of pair.toClient.splice(0)) send(pair.upstream, pair.client, d);
        if (pair.upstreamEnded) pair.client.end(() => drop(pair));
      }
    },
    get held() {
      let bytes = 0;
      for (const pair of pairs) bytes += [...pair.toServer, ...pair.toClient].reduce((n, d) => n + d.length, 0);
      return { connections: pairs.size, bytes };
    },
  };
}
