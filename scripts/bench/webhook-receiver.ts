/**
 * The webhooks part's receiver (webhooks.ts), a child process of the bench so that its work is not
 * the load generator's: answers every POST 204 at once and counts them. Told over IPC: `count`
 * (how many arrived) and `reset`.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ReceiverCommand = 'count' | 'reset';

let arrived = 0;
const server = createServer((request, response) => {
  request.resume().on('end', () => {
    arrived += 1;
    response.writeHead(204).end();
  });
});

process.on('message', (command: ReceiverCommand) => {
  if (command === 'count') process.send?.({ count: arrived });
  else arrived = 0;
});
// The bench going away, however it ends, ends this process too.
process.on('disconnect', () => process.exit(0));
server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
