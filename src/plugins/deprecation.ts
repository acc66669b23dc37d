import type { onRequestHookHandler } from 'fastify';
import type { ContractOperation } from '../contract/document.js';

/**
 * The headers every response of a deprecated operation carries, from its contract: `Deprecation`
 * (RFC 9745, a structured date), `Sunset` (RFC 8594) and a `Link` to its successor.
 */
export function deprecationHeaders(
  operation: ContractOperation,
  operations: readonly ContractOperation[],
  basePath: string,
): Record<string, string> | undefined {
  const { deprecation } = operation;
  if (deprecation === undefined) return undefined;
  const successor = operations.find(({ operationId }) => operationId === deprecation.successor);
  return {
    deprecation: `@${Math.floor(deprecation.deprecatedAt.getTime() / 1000)}`,
    sunset: deprecation.sunset.toUTCString(),
    link: `<${basePath}${successor?.path ?? ''}>; rel="successor-version"`,
  };
}

/** Marks every response of a deprecated operation, errors included (it runs before auth). */
export function markDeprecated(headers: Record<string, string>): onRequestHookHandler {
  return function addDeprecationHeaders(_request, reply, done) {
    reply.headers(headers);
    done();
  };
}
