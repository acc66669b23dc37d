import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';

/** When getPet was deprecated (RFC 9745 structured date: 2026-11-22) and when it goes away. */
const DEPRECATED_AT = '@1795305600';
const SUNSET = 'Thu, 05 Dec 2030 00:00:00 GMT';

/** Marks every response of a deprecated operation, errors included (it runs before auth). */
export function deprecationHeaders(successorPath: string): onRequestAsyncHookHandler {
  const link = `<${successorPath}>; rel="successor-version"`;
  return async function markDeprecated(_request: FastifyRequest, reply: FastifyReply) {
    reply.headers({ deprecation: DEPRECATED_AT, sunset: SUNSET, link });
  };
}
