import type { FastifyInstance } from 'fastify';
import type { PathTable } from '../contract/path-table.js';
import { answerConnect } from '../http/connect.js';
import type { AnswerFor } from '../http/raw-answers.js';
import { countUnmatched } from '../metrics/http.js';
import type { Metrics } from '../metrics/registry.js';
import { unroutableTarget } from '../plugins/not-found.js';
import { withoutKeys } from '../plugins/request-log.js';
import { requestId } from './server-options.js';

/**
 * Answers CONNECT on the app's server: Node destroys a CONNECT's socket unanswered unless a
 * listener takes it. The answer is any unrouted method's, logged and counted as those are.
 */
export function answerConnectRequests(
  app: FastifyInstance,
  paths: PathTable,
  answerFor: AnswerFor,
  metrics: Metrics | undefined,
): void {
  app.server.on(
    'connect',
    answerConnect({
      errorFor: (method, target) => unroutableTarget(method, target, paths),
      answerFor,
      requestId,
      answered: (request, reqId, statusCode) => {
        // The line every request has (RequestLog), with what is known of this one.
        const url = withoutKeys(request.url ?? '');
        app.log.info(
          { reqId, method: request.method, url, client: request.socket.remoteAddress, statusCode },
          'request',
        );
        if (metrics !== undefined) countUnmatched(metrics, request.method ?? 'CONNECT', statusCode);
      },
    }),
  );
}
