import type { FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import type { Storage } from '../storage/types.js';
import { ApiError } from '../domain/errors.js';
import { databaseUnavailable, send } from './errors.js';
import { answerUnderPressure } from './overload.js';

export interface HealthOptions {
  storage: Storage;
  /** While the server sheds load (overload.ts), the 503 to answer: it is not ready for more. */
  overloaded: () => ApiError | undefined;
  /** How its 503 is sent: as the errors of paths outside every version are (plugins/errors.ts, `unroutedErrors`). */
  sendError?: (reply: FastifyReply, error: ApiError) => FastifyReply;
}

/** /readyz while the server drains its requests to stop (SIGTERM). */
const SHUTTING_DOWN = new ApiError(
  503,
  'service_unavailable',
  'The server is shutting down; send to another instance',
  {
    'retry-after': '1',
  },
);

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * From now on /readyz answers 503, while everything else is still served: a balancer stops
     * sending before the listener closes (SHUTDOWN_DELAY_MS). Closing the app does it too.
     */
    stopBeingReady(): void;
  }
}

/**
 * `/healthz`: the process is up (even when overloaded: restarting it would not help). `/readyz`:
 * the database answers, the server is not shedding load and not shutting down, so a load balancer
 * may send more. Neither needs a key, and both answer while other requests are shed.
 */
async function healthPlugin(
  app: FastifyInstance,
  { storage, overloaded, sendError = send }: HealthOptions,
): Promise<void> {
  // New connections are refused once closing begins, but a balancer probing over a kept-alive
  // connection still reaches /readyz while in-flight requests finish.
  let shuttingDown = false;
  app.decorate('stopBeingReady', () => {
    shuttingDown = true;
  });
  app.addHook('preClose', (done) => {
    shuttingDown = true;
    done();
  });
  // A balancer's checks, every second or so, are not traced (@fastify/otel reads `otel`).
  const config = { ...answerUnderPressure, probe: true, otel: false };
  app.get('/healthz', { config }, async () => ({ status: 'ok' }));
  // Not ready is an answer, not a failure: sent, not thrown to the error handler, which logs 5xx.
  app.get('/readyz', { config }, async (request, reply) => {
    if (shuttingDown) return sendError(reply, SHUTTING_DOWN);
    const shedding = overloaded();
    if (shedding !== undefined) return sendError(reply, shedding);
    try {
      await storage.ping();
    } catch (error) {
      request.log.warn({ err: error }, 'database not ready');
      return sendError(reply, databaseUnavailable());
    }
    return { status: 'ready' };
  });
}

export default fp(healthPlugin, { name: 'health' });
