/**
 * The webhooks part's receiver (webhooks.ts), a child process of the bench so that its work is not
 * the load generator's: answers every POST 204 at once and keeps, per request, its `webhook-id`,
 * its body and when it arrived. Told over IPC: `count` (how many arrived, and the CPU used so far),
 * `report` (what arrived, and the CPU) and `reset` (forget what arrived).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as it arrived; `at` in Unix milliseconds with a fraction, comparable across processes. */
export interface Arrival {
  id: string;
  body: string;
  at: number;
}

export type ReceiverCommand = 'count' | 'report' | 'reset';
export type ReceiverMessage =
  { port: number } | { count: number; cpuMs: number } | { arrivals: Arrival[]; cpuMs: number };

const now = () => performance.timeOrigin + performance.now();
let arrivals: Arrival[] = [];

const server = createServer((request, response) => {
  let body = '';
  request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
  request.on('end', () => {
    const id = request.headers['webhook-id'];
    arrivals.push({ id: typeof id === 'string' ? id : '', body, at: now() });
    response.writeHead(204).end();
  });
});

const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

const send = (message: ReceiverMessage) => process.send?.(message);

process.on('message', (command: ReceiverCommand) => {
  if (command === 'count') send({ count: arrivals.length, cpuMs: cpuMs() });
  else if (command === 'report') send({ arrivals, cpuMs: cpuMs() });
  else arrivals = [];
});
// The bench going away, however it ends, ends this process too.
process.on('disconnect', () => process.exit(0));
server.listen(0, '127.0.0.1', () => send({ port: (server.address() as AddressInfo).port }));
