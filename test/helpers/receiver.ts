import { createServer, type IncomingHttpHeaders, type RequestListener, type Server } from 'node:http';
import { type AddressInfo, createServer as createTcpServer } from 'node:net';
import type { Teardown } from './backend.js';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

interface Reply {
  status: number;
  headers?: Record<string, string>;
}

/** How the receiver answers a request: a status and headers, or a promise of them to hold the request open. */
export type Answer = (received: Received, index: number) => Reply | Promise<Reply>;

/** An HTTP server on a free port of 127.0.0.1, closed when the test ends (requests it holds open too). */
export async function loopbackServer(
  t: Teardown,
  listener: RequestListener,
): Promise<{ server: Server; port: number }> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise((resolve) => {
        server.close(resolve);
        // Requests a test still holds open would keep the server from closing.
        server.closeAllConnections();
      }),
  );
  return { server, port: (server.address() as AddressInfo).port };
}

/** A loopback port nothing listens on: connections to it are refused. */
export async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A real HTTP server on 127.0.0.1 that records what it is sent and answers as `answer` says. */
export async function startReceiver(t: Teardown, answer: Answer = () => ({ status: 204 })) {
  const received: Received[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  let respond = answer;
  const { server, port } = await loopbackServer(t, (request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const entry = { headers: request.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      received.push(entry);
      void Promise.resolve(respond(entry, received.length - 1)).then(({ status, headers = {} }) => {
        if (!response.destroyed) response.writeHead(status, headers).end();
      });
      for (const waiter of waiters.filter((w) => received.length >= w.count)) waiter.resolve();
    });
  });
  server.keepAliveTimeout = 500;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    answer: (next: Answer) => (respond = next),
    /** Resolves once `count` requests have arrived (rejects after `timeoutMs`). */
    waitFor: (count: number, timeoutMs = 15_000) =>
      new Promise<void>((resolve, reject) => {
        if (received.length >= count) {
          resolve();
          return;
        }
        const timer = setTimeout(
          () => reject(new Error(`received ${received.length} of ${count} requests`)),
          timeoutMs,
        );
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      }),
  };
}
