import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
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

/** A real HTTP server on 127.0.0.1 that records what it is sent and answers as `answer` says. */
export async function startReceiver(t: Teardown, answer: Answer = () => ({ status: 204 })) {
  const received: Received[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  let respond = answer;
  const server = createServer((request, response) => {
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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise((resolve) => {
        server.close(resolve);
        // Requests a test still holds open would keep the server from closing.
        server.closeAllConnections();
      }),
  );
  server.keepAliveTimeout = 500;
  const { port } = server.address() as AddressInfo;
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
