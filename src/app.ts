import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Redis } from 'ioredis';
import type { Contract } from './contract/document.js';
import { PathTable } from './contract/path-table.js';
import { bearerAuth } from './plugins/auth.js';
import docs, { UNSERVED_DOCS_PATHS } from './plugins/docs.js';
import errors from './plugins/errors.js';
import notFound, { frameworkErrors } from './plugins/not-found.js';
import type { AnswerFor } from './http/raw-answers.js';
import framing from './plugins/framing.js';
import health from './plugins/health.js';
import jsonBody from './plugins/json-body.js';
import overload, { overloadedError, Shedder } from './plugins/overload.js';
import { rateLimits } from './plugins/rate-limit/index.js';
import { RequestLog } from './plugins/request-log.js';
import { observeHttp } from './metrics/http.js';
import type { Metrics } from './metrics/registry.js';
import { usePrecompiledMetaSchema } from './contract/meta-schema.js';
import {
  type ConnectionLimits,
  DEFAULT_CONNECTION_LIMITS,
  DEFAULT_OVERLOAD,
  DEFAULT_RATE_LIMITS,
  type OverloadSettings,
  type RateLimitSettings,
} from './plugins/settings.js';
import type { Storage } from './storage/types.js';
import { DEFAULT_WEBHOOKS, type WebhookSettings } from './events/settings.js';
import type { Tracing } from './tracing/opentelemetry.js';
import type { ApiVersion } from './versions/change.js';
import { answerConnectRequests } from './app/connect-answers.js';
import { operationHooks, standardHeaders } from './app/operation-hooks.js';
import { BODY_LIMIT, requestId, serverOptions } from './app/server-options.js';
import { shedAnswers } from './app/shed-answers.js';
import { versionRoutes } from './app/version-routes.js';
import { servedVersions } from './app/versions.js';

export { BODY_LIMIT } from './app/server-options.js';

export interface AppOptions {
  /** The newest version's contract (openapi.yaml): what the handlers are written against. */
  contract: Contract;
  /**
   * Older versions served beside it, each under its own base path from its own contract (the newest
   * release of its major version; docs/versions.md). None by default.
   */
  olderContracts?: readonly Contract[];
  /**
   * Every major version, oldest first, with the changes leading to it (src/versions/index.ts): an
   * older version is answered through the changes made since. By default each version served, with
   * no changes.
   */
  apiVersions?: readonly ApiVersion[];
  storage: Storage;
  /** How long a request may take to arrive, and how many connections are served at once. */
  connections?: ConnectionLimits;
  /** Per-key and failed-authentication limits; see DEFAULT_RATE_LIMITS. */
  rateLimit?: RateLimitSettings;
  /** Where the rate limits are counted, shared by every instance using it (default: in this process). */
  redis?: Redis | undefined;
  /** Passed to fastify: `false` for silence, or pino options. */
  logger?: FastifyServerOptions['logger'];
  /** Where clients reach this instance, named first in the served contract (default: the listen address). */
  publicUrl?: string | undefined;
  /**
   * `npm run dev`: operations without a handler are answered from the contract (src/dev/mock.ts)
   * and every response is checked against it (src/dev/response-check.ts). Otherwise an operation
   * without a handler stops the start.
   */
  development?: boolean;
  /** Which peers' X-Forwarded-For names the client (fastify's trustProxy); none by default. */
  trustProxy?: boolean | string;
  /** Certificate and key (PEM): the server speaks HTTPS. */
  https?: { cert: Buffer; key: Buffer } | undefined;
  /** When to shed load with 503s; see DEFAULT_OVERLOAD. */
  overload?: OverloadSettings;
  /** Prometheus metrics to count requests into (served elsewhere: metrics/server.ts); none when left out. */
  metrics?: Metrics | undefined;
  /** The clock keys expire by (Unix milliseconds). */
  now?: () => number;
  /**
   * Webhook settings (WEBHOOK_*; see DEFAULT_WEBHOOKS): the API refuses endpoints outside the
   * allowed networks, past the most an account may have. Deliveries are the process's (server.ts).
   */
  webhooks?: WebhookSettings;
  /** OpenTelemetry, when configured (src/tracing/); nothing is traced when left out. */
  tracing?: Tracing | undefined;
}

/**
 * The fastify app: the plugins (cross-cutting concerns, src/plugins/) in the order a request meets
 * them, then each version's routes from its contract (src/app/). It runs nothing in the background:
 * the delivery worker is the process's (server.ts).
 */
export async function buildApp({
  contract,
  olderContracts = [],
  apiVersions,
  storage,
  logger = false,
  publicUrl,
  rateLimit = DEFAULT_RATE_LIMITS,
  redis,
  connections = DEFAULT_CONNECTION_LIMITS,
  development = false,
  metrics,
  overload: overloadSettings = DEFAULT_OVERLOAD,
  trustProxy = false,
  https,
  now = Date.now,
  webhooks = DEFAULT_WEBHOOKS,
  tracing,
}: AppOptions): Promise<FastifyInstance> {
  const versions = servedVersions(contract, olderContracts, apiVersions);
  const paths = new PathTable(versions.all);
  const httpMetrics = metrics && observeHttp(metrics);
  const onUnmatchedResponse = httpMetrics?.onUnmatchedResponse;
  const requestLog = new RequestLog();
  const { sendUnrouted } = versions;
  const answerFrameworkError = frameworkErrors(paths, onUnmatchedResponse, requestLog, sendUnrouted);
  // An error written on the socket (no request object serves it), in the words of its target's version.
  const clientErrorAnswer: AnswerFor = (target, error) =>
    versions.unroutedMigration(target)?.(error) ?? { status: error.statusCode, ...error.prepared };
  // Shedding comes before fastify sees the request (the server's guard): a shed must cost as little as possible.
  const shedder = new Shedder({ settings: overloadSettings, metrics, requestId, bodyLimit: BODY_LIMIT });
  const app = Fastify(
    serverOptions({
      guard: shedder.guard,
      logger,
      requestLog,
      trustProxy,
      https,
      connections,
      metrics,
      frameworkErrors: answerFrameworkError,
      clientErrorAnswer,
    }),
  );

  answerConnectRequests(app, paths, clientErrorAnswer, metrics);

  // @fastify/otel first: it instruments the routes and hooks added after it.
  if (tracing !== undefined) await app.register(tracing.plugin);
  app.addHook('onRequest', standardHeaders);
  // Before any route, so that each is observed.
  httpMetrics?.register(app);
  const overloaded = overloadedError(overloadSettings);
  await app.register(overload, { shedder, answerFor: shedAnswers(versions, paths, overloaded) });
  await app.register(framing);
  await app.register(errors, {
    sendUnrouted,
    isOperation: (request) => paths.match(request.url)?.operations.has(request.method) === true,
  });
  await app.register(notFound, { paths, onUnmatchedResponse, unserved: UNSERVED_DOCS_PATHS, sendError: sendUnrouted });
  await app.register(jsonBody);
  await app.register(health, {
    storage,
    overloaded: () => (app.isUnderPressure() ? overloaded : undefined),
    sendError: sendUnrouted,
  });
  await app.register(docs, { contracts: versions.all, publicUrl });

  const limits = await rateLimits(app, rateLimit, redis);
  // ioredis is 'ready' while connected; a hung server shows in the warning its timeouts log.
  if (redis !== undefined) metrics?.watchRedis(() => redis.status === 'ready');
  const hooks = operationHooks(versions, paths, (refuse) => {
    const bearer = bearerAuth(storage.accounts, refuse, { failures: limits.authFailure, perKey: limits.perKey }, now);
    return tracing?.authentication(bearer) ?? bearer;
  });
  // Declared up front, so a request has the same shape before and after authentication sets it.
  app.decorateRequest('principal', undefined);
  // The glue validates the contract again; with the build's compiled meta-schema that is cheap.
  await usePrecompiledMetaSchema();
  for (const version of versions.all) {
    const routes = { version, versions, newest: contract, storage, webhooks, hooks, development, tracing };
    await app.register(versionRoutes, routes);
  }
  return app;
}
