import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Whether more body than `limit()`, or a body of unknown length, may still be on its way: such a
 * request is refused with its connection closed (largeBodyToCome in plugins/errors.ts, and a shed
 * request in overload.ts, not yet routed).
 */
export function moreBodyThan(request: IncomingMessage, limit: () => number): boolean {
  const { headers, complete } = request;
  if (complete) return false;
  if (headers['transfer-encoding'] !== undefined) return true;
  const length = headers['content-length'];
  return length !== undefined && Number(length) > limit();
}

/**
 * How long a connection is kept after its closing answer, for the client to read it and close.
 * Closing at once while the client is still sending makes the kernel reset the connection, and a
 * client that reads only after sending (Node's http, Python's http.client) loses the answer;
 * waiting without a bound would let a client that ignores the answer hold the connection, against
 * MAX_CONNECTIONS and a graceful shutdown.
 */
const CLOSE_LINGER_MS = 1_000;

/** Ends the connection (the client sees the end after the answer) and closes it once the client has or the linger is over. */
export function closeLingering(socket: Socket): void {
  if (!socket.writableEnded) socket.end();
  const linger = setTimeout(() => socket.destroy(), CLOSE_LINGER_MS);
  socket.once('close', () => clearTimeout(linger));
}

/**
 * Node closes a `Connection: close` connection with `destroySoon` once the answer is written, at
 * once; this socket closes lingering instead, while Node reads and drops what the client still sends.
 */
export function closeLingeringAfterAnswer(socket: Socket): void {
  socket.destroySoon = () => closeLingering(socket);
}
