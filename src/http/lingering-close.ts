import type { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';

/**
 * Whether more body than `limit()`, or a body of unknown length, may still be on its way: such a
 * request is refused and its connection closed after the answer (closeAfterAnswer), rather than
 * the rest read (largeBodyToCome in plugins/errors.ts, and a shed request in overload.ts, not yet
 * routed).
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
 * Closes the connection, lingering, once `response` is written. The answer does not say
 * `Connection: close`: Node would then close the connection itself, at once, and a client still
 * sending its body would be reset before it read the answer (HAProxy in front loses it too); Node
 * offers no public way to linger instead. The client sees the connection end after the answer.
 */
export function closeAfterAnswer(response: ServerResponse): void {
  const { socket } = response.req;
  // An injected request (fastify's inject) has no connection to close.
  if (!(socket instanceof Socket)) return;
  closing.add(socket);
  response.once('finish', () => closeLingering(socket));
}

/** The connections whose last answer is decided: what arrives after it is the refused request's body. */
const closing = new WeakSet<Socket>();

/** Whether the connection closes after an answer decided already (closeAfterAnswer). */
export function isClosing(socket: Socket): boolean {
  return closing.has(socket);
}
