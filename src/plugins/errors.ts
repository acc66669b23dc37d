import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError, type PreparedAnswer, PROBLEM_CONTENT_TYPE, type ProblemBody } from '../domain/errors.js';
import { closeAfterAnswer, moreBodyThan } from '../http/lingering-close.js';
import { DATABASE_RETRY_AFTER_SECONDS, StorageUnavailableError } from '../storage/types.js';
import { recordFailure } from './request-log.js';
import { describeValidation } from './validation-messages.js';
import type { MigratedAnswer } from './versioning.js';

/** The error for a failure fastify or a hook raised; never fastify's own shape. */
export function toApiError(error: FastifyError | ApiError | Error): ApiError {
  if (error instanceof ApiError) return error;
  const fastifyError = error as FastifyError;
  if (fastifyError.validation !== undefined) {
    return new ApiError(400, 'invalid_request', describeValidation(fastifyError));
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(413, 'payload_too_large', error.message);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(415, 'unsupported_media_type', 'Content-Type must be application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError(400, 'malformed_json', 'Body is empty but Content-Type is application/json');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ApiError(400, 'malformed_json', 'Body is not valid JSON');
    default:
      break;
  }
  // JSON.parse failures and secure-json-parse's prototype-poisoning rejection.
  if (error instanceof SyntaxError || fastifyError.statusCode === 400) {
    return new ApiError(400, 'malformed_json', `Body is not valid JSON: ${error.message}`);
  }
  if (error instanceof StorageUnavailableError) return databaseUnavailable();
  const status = fastifyError.statusCode ?? 500;
  if (status === 413) return new ApiError(413, 'payload_too_large', error.message);
  if (status === 415) return new ApiError(415, 'unsupported_media_type', error.message);
  if (status >= 400 && status < 500) return new ApiError(400, 'invalid_request', error.message);
  return new ApiError(500, 'internal_error', 'Internal server error');
}

export function databaseUnavailable(): ApiError {
  return new ApiError(503, 'service_unavailable', 'The database is not available; retry shortly', {
    'retry-after': String(DATABASE_RETRY_AFTER_SECONDS),
  });
}

/**
 * Before a refusal from the headers: a body too large or of unknown length closes the connection,
 * lingering, without the `Connection: close` fastify sets on a body it refuses (a 413), with which
 * Node would close at once (closeAfterAnswer).
 */
function closeIfLargeBodyToCome(reply: FastifyReply): void {
  if (!largeBodyToCome(reply.request)) return;
  reply.removeHeader('connection');
  closeAfterAnswer(reply.raw);
}

/** Sets the status and headers of an error's answer and returns its body (an older version's route migrates both). */
function prepareErrorReply(reply: FastifyReply, error: ApiError): ProblemBody {
  closeIfLargeBodyToCome(reply);
  // Also on a 404 or 405, which no route's hooks (and so no API headers) reach: a cache could keep those.
  reply.header('cache-control', 'no-store');
  // The media type last, where fastify would have set it: an older version's answer keeps its header order.
  reply.code(error.statusCode).headers(error.headers).header('content-type', PROBLEM_CONTENT_TYPE);
  return error.toBody();
}

export function send(reply: FastifyReply, error: ApiError): FastifyReply {
  return reply.send(prepareErrorReply(reply, error));
}

/**
 * Answers a refusal decided in an onRequest hook (401, 429, 503); the hook then returns (or calls
 * `done`) without an error, and no hook after it runs, nor the handler.
 */
export type Refuse = (reply: FastifyReply, error: ApiError) => void;

/**
 * Sends an answer prepared once (ApiError.prepared, or an older version's migration of it): a
 * string with its Content-Type, which fastify neither serializes nor passes to preSerialization
 * hooks. The onSend hooks (in `npm run dev`, the check of every response against the contract), the
 * onResponse hooks (metrics) and the log line run as for any answer.
 */
function sendAnswer(reply: FastifyReply, status: number, { body, headers }: PreparedAnswer): void {
  closeIfLargeBodyToCome(reply);
  void reply.code(status).headers(headers).send(body);
}

/** Turns an error of the newest version into an older version's answer (plugins/versioning.ts). */
export type ErrorMigration = (error: ApiError) => MigratedAnswer;

/** How refusals are answered: as they are, or, under an older version, as `migrate` makes them. */
export function refusals(migrate?: ErrorMigration): Refuse {
  if (migrate === undefined) return (reply, error) => sendAnswer(reply, error.statusCode, error.prepared);
  return (reply, error) => {
    const answer = migrate(error);
    sendAnswer(reply, answer.status, answer);
  };
}

/**
 * How the errors of requests no route answers (404, 405, an undecodable URL) are sent: under an
 * older version's base path (`olderFor`), as that version gives them.
 */
export function unroutedErrors(
  olderFor?: (url: string) => ErrorMigration | undefined,
): (reply: FastifyReply, error: ApiError) => FastifyReply {
  if (olderFor === undefined) return send;
  return (reply, error) => {
    const migrate = olderFor(reply.request.url);
    if (migrate === undefined) return send(reply, error);
    const { status, body, headers } = migrate(error);
    closeIfLargeBodyToCome(reply);
    return reply.code(status).headers(headers).send(body);
  };
}

/**
 * Whether a request refused from its headers (401, 404, 405, 413, 415) may still have more than the
 * body limit, or a body of unknown length, on its way. Node would read and discard all of it to
 * keep the connection; such a connection is closed instead. A smaller body is read and dropped, which
 * costs little and keeps the connection.
 */
function largeBodyToCome(request: FastifyRequest): boolean {
  // routeOptions builds an object each time it is read: only for a request that announces a body.
  return moreBodyThan(request.raw, () => request.routeOptions.bodyLimit);
}

export interface ErrorsOptions {
  /**
   * How an error no operation answers is sent (`unroutedErrors`): a request no route answers, or one
   * to a route outside the contract (/readyz, /docs). An operation's error is migrated by its own hooks.
   */
  sendUnrouted?: (reply: FastifyReply, error: ApiError) => FastifyReply;
  /** Whether a routed request is to an operation of the contract (by default, every one is). */
  isOperation?: (request: FastifyRequest) => boolean;
}

async function errorsPlugin(
  app: FastifyInstance,
  { sendUnrouted = send, isOperation = () => true }: ErrorsOptions,
): Promise<void> {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const apiError = toApiError(error);
    if (apiError.statusCode >= 500) recordFailure(request, error);
    return request.is404 || !isOperation(request) ? sendUnrouted(reply, apiError) : send(reply, apiError);
  });
}

export default fp(errorsPlugin, { name: 'errors' });
