import net from 'node:net';

/** What crossed the wire between the product and PostgreSQL since the last reset. */
export interface WireCounts {
  /** Statements the server ran: one CommandComplete or ErrorResponse each (BEGIN and COMMIT included). */
  statements: number;
  /** Messages after which the client waits for the server: Query, Sync and Flush. */
  roundTrips: number;
  /** Transactions ended: ReadyForQuery back to idle, implicit transactions included (not the login's). */
  transactions: number;
  /** Connections opened. */
  connections: number;
}

/** A TCP forwarder to PostgreSQL that reads the protocol's message types both ways and counts them. */
export interface WireCounter {
  /** Rewrites a PostgreSQL URL to go through the counter. */
  urlThrough(url: string): string;
  counts(): WireCounts;
  reset(): void;
  close(): Promise<void>;
}

const zero = (): WireCounts => ({ statements: 0, roundTrips: 0, transactions: 0, connections: 0 });

/**
 * Splits a stream of protocol messages (type byte, then a length that counts itself) and hands each
 * message's type and first body byte to `onMessage`. The client's first message (startup) has no
 * type byte: `untypedFirst` skips it by its length alone.
 */
function messageReader(untypedFirst: boolean, onMessage: (type: string, firstByte: number) => void): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0);
  let untyped = untypedFirst;
  return (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    let at = 0;
    for (;;) {
      const header = untyped ? 4 : 5;
      if (pending.length - at < header) break;
      const length = pending.readInt32BE(at + header - 4);
      const total = header - 4 + length;
      if (pending.length - at < total) break;
      if (untyped) {
        if (pending.readInt32BE(at + 4) === 80877103) throw new Error('the wire counter reads no TLS: connect without sslmode');
        untyped = false;
      } else {
        onMessage(String.fromCharCode(pending[at]), length > 4 ? pending[at + 5] : 0);
      }
      at += total;
    }
    pending = pending.subarray(at);
  };
}

export async function startWireCounter(target: { host: string; port: number }): Promise<WireCounter> {
  let counts = zero();
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    counts.connections += 1;
    let loggedIn = false;
    const fromClient = messageReader(true, (type) => {
      if (type === 'Q' || type === 'S' || type === 'H') counts.roundTrips += 1;
    });
    const fromServer = messageReader(false, (type, status) => {
      if (type === 'C' || type === 'E') counts.statements += 1;
      if (type !== 'Z') return;
      // The first ReadyForQuery ends the login, not a transaction.
      if (loggedIn && status === 'I'.charCodeAt(0)) counts.transactions += 1;
      loggedIn = true;
    });
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.on('data', (chunk: Buffer) => {
      fromClient(chunk);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      fromServer(chunk);
      client.write(chunk);
    });
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    urlThrough(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    counts: () => ({ ...counts }),
    reset() {
      counts = zero();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
