import type { Server } from 'node:http';
import { serveConnectAsRequest } from './connect.js';
import { watchAnswersBeforeBody } from './raw-answers.js';

/** What the app changes of Node's HTTP server: its defaults answer some requests before fastify can. */
export function adaptNodeServer(server: Server, maxConnections: number): void {
  server.maxConnections = maxConnections;
  // A client that half-closes once it has sent its request (`nc -N`, some HTTP/1.0 tools) still gets
  // its answer: by default Node ends such a connection at once, dropping a response that waits on
  // the database. The connection closes after the last answer instead.
  (server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  // Node would answer `Expect: 100-continue` with a 100 before any hook runs, inviting a body that
  // authentication may refuse (continueBeforeBody in app.ts sends it once the body is wanted), and
  // any other expectation with an empty 417. Both are served as requests like any other.
  server.on('checkContinue', (request, response) => server.emit('request', request, response));
  server.on('checkExpectation', (request, response) => server.emit('request', request, response));
  server.on('connect', serveConnectAsRequest(server));
  watchAnswersBeforeBody(server);
}
