import { type IncomingMessage, type RequestListener, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { closeLingering } from './lingering-close.js';

/**
 * Node hands a CONNECT request to the server's 'connect' listeners with the bare socket, and with
 * none destroys it unanswered. This one serves it as a request like any other: the not-found
 * handler answers it (a 405 or 404, or a 400 for a `host:port` target), counted and logged as
 * others are; then the connection closes, as Node reads no more HTTP on it.
 */
export function serveConnectAsRequest(listener: RequestListener) {
  return (request: IncomingMessage, socket: Socket): void => {
    // Node took its own listeners off the socket: a reset is no longer reported, nor worth reporting.
    socket.on('error', () => undefined);
    // Whatever the client sends next is dropped, so its end is seen and the connection can close.
    socket.resume();
    const response = new ServerResponse(request);
    response.shouldKeepAlive = false;
    response.assignSocket(socket);
    // The response's 'close', which fastify and the metrics wait for, comes with the socket's.
    response.once('finish', () => closeLingering(socket));
    listener(request, response);
  };
}
