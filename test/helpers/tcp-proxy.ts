import net from 'node:net';
import { findFreePort } from '../../src/store/embedded';

/** A TCP forwarder that can be switched off and on, to make the database unreachable and bring it back. */
export interface TcpProxy {
  port: number;
  /** Rewrites a PostgreSQL URL to go through the proxy. */
  urlThrough(url: string): string;
  /** Starts accepting connections (on the same port every time). */
  start(): Promise<void>;
  /** Refuses new connections and cuts the open ones, as a database crash would. */
  stop(): Promise<void>;
}

export async function createTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const port = await findFreePort();
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
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
        const upstream = net.connect(target.port, target.host);
        sockets.add(client).add(upstream);
        const drop = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on('error', drop).on('close', drop);
        upstream.on('error', drop).on('close', drop);
        client.pipe(upstream).pipe(client);
      });
      const s = server;
      await new Promise<void>((resolve, reject) => s.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
    },
    async stop() {
      const s = server;
      server = undefined;
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
    },
  };
}
