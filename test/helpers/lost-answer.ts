import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import type { Teardown } from './backend.js';

/** Closes a server listening on loopback, and every connection it holds. */
export function closing(t: Teardown, server: Server): void {
  t.teardown(
    () =>
      new Promise((resolve) => {
        server.close(resolve);
        server.unref();
      }),
  );
}

export async function listening(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/**
 * A loopback proxy to `port` that forwards the first request it gets and, once the server has
 * answered it, cuts the client's connection instead of passing the answer on: a response lost on
 * the way back. Every later connection is passed through whole.
 */
export async function losingFirstAnswer(t: Teardown, port: number): Promise<{ port: number; lost: () => boolean }> {
  let connections = 0;
  let lost = false;
  const sockets = new Set<Socket>();
  const proxy = createServer((client) => {
    const first = connections++ === 0;
    const upstream = new (client.constructor as typeof Socket)();
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    upstream.connect(port, '127.0.0.1');
    client.pipe(upstream);
    if (!first) upstream.pipe(client);
    else
      upstream.once('data', () => {
        lost = true;
        client.destroy();
        upstream.destroy();
      });
  });
  closing(t, proxy);
  t.teardown(() => sockets.forEach((socket) => socket.destroy()));
  return { port: await listening(proxy), lost: () => lost };
}
