import { conformingFetch, type Teardown } from './api.js';
import { loopbackServer } from './receiver.js';

/** Headers of one connection, not of the message: not passed on. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'proxy-connection',
]);

/**
 * A loopback HTTP proxy to `baseUrl`'s origin that checks each answer against the contract, as
 * `conformingFetch` does, before passing it on: for clients outside this process (the Python
 * one). An answer that departs from the contract is passed on as a 502 saying why, and kept in
 * `failures`. Returns `baseUrl` with the proxy's origin.
 */
export async function conformingProxy(t: Teardown, baseUrl: string): Promise<{ baseUrl: string; failures: string[] }> {
  const target = new URL(baseUrl);
  const failures: string[] = [];
  const { port } = await loopbackServer(t, (request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const headers = new Headers();
      for (const [name, value] of Object.entries(request.headers)) {
        if (value !== undefined && !HOP_BY_HOP.has(name))
          headers.set(name, Array.isArray(value) ? value.join(', ') : value);
      }
      const body = chunks.length === 0 ? null : Buffer.concat(chunks);
      const forwarded = new Request(new URL(request.url ?? '/', target.origin), {
        method: request.method ?? 'GET',
        headers,
        body,
      });
      conformingFetch(forwarded)
        .then(async (answer) => {
          const bytes = Buffer.from(await answer.arrayBuffer());
          const passed = [...answer.headers].filter(([name]) => !HOP_BY_HOP.has(name) && name !== 'content-encoding');
          response.writeHead(answer.status, Object.fromEntries(passed)).end(bytes);
        })
        .catch((error: unknown) => {
          const message = error instanceof Error ? error.message : String(error);
          failures.push(message);
          response.writeHead(502, { 'content-type': 'text/plain' }).end(message);
        });
    });
  });
  return { baseUrl: `http://127.0.0.1:${port}${target.pathname}`, failures };
}
