import { createServer as createHttpServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { watchAnswers } from './raw-answers.js';

export interface NodeServerOptions {
  /** A request (headers and body) must arrive within this (ms); slower clients get 408. */
  requestTimeoutMs: number;
  /** Connections beyond this are refused. */
  maxConnections: number;
  /** Certificate and key (PEM): the server speaks HTTPS. */
  https?: { cert: Buffer; key: Buffer } | undefined;
  /**
   * What runs before fastify sees a request, and decides whether it does (the overload guard,
   * plugins/overload.ts): given fastify's handler, the listener that calls it or answers itself.
   */
  guard?: (serve: RequestListener) => RequestListener;
}

/** fastify's own default: longer than a balancer's or a browser's idle timeout, so they close first. */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/**
 * fastify's `serverFactory`: the HTTP or HTTPS server the app is served on, made with Node's
 * documented options and events only. Its defaults would answer some requests before fastify could,
 * so those are passed to fastify's handler as requests like any other; a CONNECT, which Node hands
 * over as a bare socket, is answered by the app's 'connect' listener (http/connect.ts).
 */
export function nodeServerFactory({ requestTimeoutMs, maxConnections, https, guard }: NodeServerOptions) {
  return (handler: RequestListener): Server => {
    const serve = guard?.(handler) ?? handler;
    const listener: RequestListener = (request, response) => {
      watchAnswers(request, response);
      serve(request, response);
    };
    const options = {
      requestTimeout: requestTimeoutMs,
      headersTimeout: Math.min(5_000, requestTimeoutMs),
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      // Node checks the timeouts above this often (default 30 s: too coarse to be a limit).
      connectionsCheckingInterval: Math.min(1_000, requestTimeoutMs / 4),
      // The framing plugin answers a missing Host with an Error body; Node's answer has none.
      requireHostHeader: false,
    };
    // HTTPS over Node's https server: the same request API, so the app keeps the HTTP server's types.
    const server: Server =
      https === undefined ? createHttpServer(options, listener) : createHttpsServer({ ...options, ...https }, listener);
    server.maxConnections = maxConnections;
    // Node would answer `Expect: 100-continue` with a 100 before any hook runs, inviting a body that
    // authentication may refuse (continueBeforeBody in app.ts sends it once the body is wanted), and
    // any other expectation with an empty 417. Both are served as requests like any other.
    server.on('checkContinue', listener);
    server.on('checkExpectation', listener);
    return server;
  };
}
