import { randomUUID } from 'node:crypto';
import type { IncomingMessage, RequestListener, Server } from 'node:http';
import type { FastifyHttpOptions, FastifyServerOptions } from 'fastify';
import { nodeServerFactory } from '../http/node-server.js';
import { type AnswerFor, clientErrorHandlerWith } from '../http/raw-answers.js';
import { countUnparsable } from '../metrics/http.js';
import type { Metrics } from '../metrics/registry.js';
import { type RequestLog, requestLogger } from '../plugins/request-log.js';
import { serializerFactory } from '../plugins/serialization.js';
import type { ConnectionLimits } from '../plugins/settings.js';
import { compileValidator, validationFailure } from '../plugins/validation.js';
import { rewriteUndecodable } from '../plugins/undecodable-url.js';

/** 16 KiB: the decisions' body limit, enforced from Content-Length before the body is read. */
export const BODY_LIMIT = 16 * 1024;

/** Longer than any request line Node reads (its header limit): the router never refuses a parameter's length. */
const ROUTER_PARAMETER_LIMIT = 1024 * 1024;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Echo a sane `X-Request-Id`; anything else (too long, odd characters) is replaced. */
export function requestId(request: IncomingMessage): string {
  const sent = request.headers['x-request-id'];
  return typeof sent === 'string' && REQUEST_ID.test(sent) ? sent : randomUUID();
}

type ValidatorFactory = NonNullable<
  NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildValidator']
>;
/** fastify types this factory after its default (ajv) compiler; at run time any schema compiler fits. */
const contractValidatorFactory = (() => compileValidator) as unknown as ValidatorFactory;

export interface ServerSettings {
  /** What runs before fastify sees a request, and decides whether it does (the overload guard). */
  guard: (serve: RequestListener) => RequestListener;
  logger: NonNullable<FastifyServerOptions['logger']>;
  requestLog: RequestLog;
  trustProxy: boolean | string;
  https: { cert: Buffer; key: Buffer } | undefined;
  connections: ConnectionLimits;
  metrics: Metrics | undefined;
  frameworkErrors: NonNullable<FastifyServerOptions['frameworkErrors']>;
  /** An error written before any request exists, in the words of the version its request target is under. */
  clientErrorAnswer: AnswerFor;
}

/** fastify's options: the request id, the log, the limits and timeouts, and the contract's compilers. */
export function serverOptions({
  guard,
  logger,
  requestLog,
  trustProxy,
  https,
  connections,
  metrics,
  frameworkErrors,
  clientErrorAnswer,
}: ServerSettings): FastifyHttpOptions<Server> {
  // The server is nodeServerFactory's; fastify is told of HTTPS only for the addresses it logs.
  const tls: object = https === undefined ? {} : { https };
  return {
    logger,
    // The failed-authentication limit and the logs use request.ip: the client's address from
    // X-Forwarded-For when the peer is a trusted proxy, the peer's otherwise.
    trustProxy,
    ...tls,
    bodyLimit: BODY_LIMIT,
    genReqId: requestId,
    logController: requestLog,
    childLoggerFactory: requestLogger,
    // HEAD is not in the contract: it gets 405 like any other undeclared method.
    exposeHeadRoutes: false,
    // fastify's closing 503 uses its own error shape; in-flight requests finish instead.
    return503OnClosing: false,
    serverFactory: nodeServerFactory({ ...connections, https, guard }),
    clientErrorHandler: clientErrorHandlerWith(
      metrics && ((status) => countUnparsable(metrics, status)),
      clientErrorAnswer,
    ),
    frameworkErrors,
    // A URL the router cannot decode still reaches the operation it names, and its hooks, before its 400.
    rewriteUrl: rewriteUndecodable,
    // The length of a path parameter is checked after the operation's hooks (undecodable-url.ts), not by the router.
    routerOptions: { maxParamLength: ROUTER_PARAMETER_LIMIT },
    // Every schema is compiled by the contract's rules (plugins/validation.ts). Given here rather
    // than with setValidatorCompiler, fastify never loads its default ajv compiler.
    schemaController: {
      compilersFactory: { buildValidator: contractValidatorFactory, buildSerializer: serializerFactory },
    },
    schemaErrorFormatter: validationFailure,
  };
}
