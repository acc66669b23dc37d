import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError } from '../errors.js';

/**
 * Headers a request may carry once. Node keeps the first of a repeated one and drops the rest,
 * so a request like `Host: a` + `Host: b` would mean different things to a proxy and to us.
 */
const SINGLE_VALUE_HEADERS = new Set(['host', 'authorization', 'content-type', 'content-length', 'idempotency-key']);

function repeatedHeader(request: FastifyRequest): string | undefined {
  const { rawHeaders } = request.raw;
  const seen = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]?.toLowerCase() ?? '';
    if (!SINGLE_VALUE_HEADERS.has(name)) continue;
    if (seen.has(name)) return name;
    seen.add(name);
  }
  return undefined;
}

/**
 * Rejects requests whose HTTP framing is ambiguous, with the Error body (RFC 9112 3.2: a request
 * without Host, or with more than one, is a 400). Node's own check for Host answers with an empty
 * body, so it is turned off (`requireHostHeader: false`) in favour of this one.
 */
async function framingPlugin(app: FastifyInstance): Promise<void> {
  app.addHook('onRequest', async (request) => {
    if (request.headers.host === undefined && request.raw.httpVersion !== '1.0') {
      throw new ApiError(400, 'invalid_request', 'The Host header is required');
    }
    const repeated = repeatedHeader(request);
    if (repeated !== undefined) {
      throw new ApiError(400, 'invalid_request', `The ${repeated} header may be sent only once`);
    }
  });
}

export default fp(framingPlugin, { name: 'framing' });
