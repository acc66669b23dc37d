/**
 * Development only (`npm run dev`): every API response is checked against the contract as it is
 * sent, and a violation is logged as an error naming the operation, the status and the schema
 * path, so drift shows the moment it happens. Production never registers it, so pays nothing.
 */
import type { onSendHookHandler } from 'fastify';
import type { Contract } from '../contract/document.js';
import { ResponseConformance } from '../contract/response-conformance.js';

export function checkResponses(contract: Contract): onSendHookHandler {
  const conformance = new ResponseConformance(contract);
  return (request, reply, payload, done) => {
    const body = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : '';
    const response = { statusCode: reply.statusCode, headers: reply.getHeaders(), body };
    const violations = conformance.violations(request.method, request.url, response);
    if (violations.length > 0) {
      const { operation } = conformance.findOperation(request.method, request.url);
      request.log.error(
        { operation: operation?.operationId, status: reply.statusCode, violations },
        `response does not conform to the contract: ${violations.join('; ')}`,
      );
    }
    done(null, payload);
  };
}
