import type { onRequestHookHandler } from 'fastify';

/** When getPet was deprecated (RFC 9745 structured date: 2026-11-22) and when it goes away (RFC 8594). */
const DEPRECATED_AT = '@1795305600';
const SUNSET = 'Thu, 05 Dec 2030 00:00:00 GMT';

export function deprecationHeaders(successorPath: string): Record<string, string> {
  return { deprecation: DEPRECATED_AT, sunset: SUNSET, link: `<${successorPath}>; rel="successor-version"` };
}

/** Marks every response of a deprecated operation, errors included (it runs before auth). */
export function markDeprecated(headers: Record<string, string>): onRequestHookHandler {
  return function addDeprecationHeaders(_request, reply, done) {
    reply.headers(headers);
    done();
  };
}
