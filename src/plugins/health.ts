import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Storage } from '../storage/types.js';
import { databaseUnavailable } from './errors.js';

/** `/healthz`: the process is up. `/readyz`: the database answers. Neither needs a key. */
async function healthPlugin(app: FastifyInstance, { storage }: { storage: Storage }): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (request) => {
    try {
      await storage.ping();
    } catch (error) {
      request.log.warn({ err: error }, 'database not ready');
      throw databaseUnavailable();
    }
    return { status: 'ready' };
  });
}

export default fp(healthPlugin, { name: 'health' });
