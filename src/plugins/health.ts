import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError } from '../errors.js';
import type { Storage } from '../storage/types.js';

/** `/healthz`: the process is up. `/readyz`: the database answers. Neither needs a key. */
async function healthPlugin(app: FastifyInstance, { storage }: { storage: Storage }): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (request) => {
    try {
      await storage.ping();
    } catch (error) {
      request.log.warn({ err: error }, 'database not ready');
      throw new ApiError(503, 'service_unavailable', 'The database is not available');
    }
    return { status: 'ready' };
  });
}

export default fp(healthPlugin, { name: 'health' });
