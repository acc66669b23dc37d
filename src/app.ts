import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import Fastify, {
  type FastifyInstance,
  type FastifyRequest,
  type FastifyServerOptions,
  type onRequestHookHandler,
  type preParsingHookHandler,
  type RouteOptions,
} from 'fastify';
import openapiGlue from 'fastify-openapi-glue';
import type { Redis } from 'ioredis';
import {
  type Contract,
  type ContractOperation,
  eventsWithoutScope,
  incompleteDeprecations,
} from './contract/document.js';
import { serviceHandlers } from './handlers/index.js';
import { bearerAuth, requireScopes } from './plugins/auth.js';
import { PathTable } from './contract/path-table.js';
import { deprecationHeaders, markDeprecated } from './plugins/deprecation.js';
import docs, { UNSERVED_DOCS_PATHS } from './plugins/docs.js';
import errors, { refusals, unroutedErrors, type ErrorMigration, type Refuse } from './plugins/errors.js';
import notFound, { emptyPathParameterIsUnroutable, frameworkErrors, type RequestHook } from './plugins/not-found.js';
import framing, { refuseUnimplementedTransferCoding } from './plugins/framing.js';
import health from './plugins/health.js';
import jsonBody, { JSON_MEDIA_TYPES, refuseAnyBody, refuseUnreadableBody } from './plugins/json-body.js';
import overload, { overloadedError, type ShedAnswer, shedAnswer } from './plugins/overload.js';
import { OlderVersion } from './plugins/versioning.js';
import { rateLimits } from './plugins/rate-limit/index.js';
import { compileValidator, validateEveryQueryString, validationFailure } from './plugins/validation.js';
import { RequestLog, requestLogger } from './plugins/request-log.js';
import { serializerFactory } from './plugins/serialization.js';
import { adaptNodeServer } from './http/node-server.js';
import { clientErrorHandlerWith } from './http/raw-answers.js';
import { countUnparsable, observeHttp } from './metrics/http.js';
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
import { Dispatcher } from './events/dispatcher.js';
import { DEFAULT_WEBHOOKS, type WebhookSettings } from './events/settings.js';
import type { Tracing } from './tracing/opentelemetry.js';
import type { ApiVersion } from './versions/change.js';
import { VersionChain } from './versions/chain.js';
import { parseVersion } from './versions/releases.js';

/** 16 KiB: the decisions' body limit, enforced from Content-Length before the body is read. */
export const BODY_LIMIT = 16 * 1024;

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
  /** Webhook delivery: where to, how long, how often (WEBHOOK_*); see DEFAULT_WEBHOOKS. */
  webhooks?: WebhookSettings;
  /** OpenTelemetry, when configured (src/tracing/); nothing is traced when left out. */
  tracing?: Tracing | undefined;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Echo a sane `X-Request-Id`; anything else (too long, odd characters) is replaced. */
function requestId(request: IncomingMessage): string {
  const sent = request.headers['x-request-id'];
  return typeof sent === 'string' && REQUEST_ID.test(sent) ? sent : randomUUID();
}

// The hooks that run on every request are synchronous: one that returns a promise costs a
// promise and a microtask per request (BENCHMARKS.md).

/** On every response: the request id, and no content sniffing. */
const standardHeaders: onRequestHookHandler = (request, reply, done) => {
  reply.header('x-request-id', request.id).header('x-content-type-options', 'nosniff');
  done();
};

const EXPECT_CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

/** Sends `100 Continue` to a client waiting for it, once the hooks have let its body be read. */
const continueBeforeBody: preParsingHookHandler = (request, reply, payload, done) => {
  if (EXPECT_CONTINUE.test(request.headers.expect ?? '')) reply.raw.writeContinue();
  done(null, payload);
};

/** On API responses: they are per-key and change, so no cache may keep them. */
const apiHeaders: onRequestHookHandler = (_request, reply, done) => {
  reply.header('cache-control', 'no-store');
  done();
};

interface MediaTypeMap {
  content?: Record<string, { schema?: unknown }>;
}

/** The schema of a body the contract gives in one JSON media type and no other. */
function onlyJsonSchema(part: unknown): unknown {
  const content = (part as MediaTypeMap | undefined)?.content;
  const [mediaType, ...others] = Object.keys(content ?? {});
  if (mediaType === undefined || others.length > 0) return undefined;
  return (JSON_MEDIA_TYPES as readonly string[]).includes(mediaType) ? content?.[mediaType]?.schema : undefined;
}

/**
 * The glue keys body schemas by media type. Every body here, request or response, is JSON only,
 * so they are keyed by the body (and the status) alone:
 * - fastify validates a request body keyed by media type only when the request names that type,
 *   so a POST with no body or no Content-Type would reach the handler unvalidated. Other types are
 *   a 415 before validation, so whatever arrives is validated as JSON: a missing body is a 400.
 * - fastify finds a response serializer keyed by media type by parsing the reply's Content-Type,
 *   on every response.
 */
function keyJsonSchemasByBody(route: RouteOptions): void {
  const { schema } = route;
  if (schema === undefined) return;
  const body = onlyJsonSchema(schema.body);
  if (body !== undefined) schema.body = body;
  const responses = (schema.response ?? {}) as Record<string, unknown>;
  for (const [status, response] of Object.entries(responses)) {
    const json = onlyJsonSchema(response);
    if (json !== undefined) responses[status] = json;
  }
}

type ValidatorFactory = NonNullable<
  NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildValidator']
>;
/** fastify types this factory after its default (ajv) compiler; at run time any schema compiler fits. */
const contractValidatorFactory = (() => compileValidator) as unknown as ValidatorFactory;

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
  // Every version served, newest first; each operation is its version's, however its operationId is shared.
  const served = [contract, ...olderContracts];
  const basePaths = served.map(({ basePath }) => basePath);
  if (new Set(basePaths).size !== basePaths.length)
    throw new Error(`two versions share a base path: ${basePaths.join(', ')}`);
  const [unfit] = served.flatMap((version) => [
    ...incompleteDeprecations(version.operations),
    ...eventsWithoutScope(version.dereferenced),
  ]);
  if (unfit !== undefined) throw new Error(unfit);
  const majorOf = ({ document }: Contract) => {
    const major = parseVersion(document.info.version)?.[0];
    if (major === undefined) throw new Error(`a served contract's version is not semantic: ${document.info.version}`);
    return major;
  };
  const chain = new VersionChain(
    apiVersions ?? served.map((version) => ({ major: majorOf(version), changes: [] })).reverse(),
  );
  if (chain.newest !== majorOf(contract)) {
    throw new Error(
      `the newest contract is version ${contract.document.info.version}, but the newest version declared is ${chain.newest}`,
    );
  }
  // The older versions answered through changes that migrate something; the others need no hook.
  const olderVersions = new Map(
    olderContracts.flatMap((version) => {
      const older = new OlderVersion(majorOf(version), version.basePath, chain);
      return older.migratesRequests || older.migratesResponses ? [[version, older] as const] : [];
    }),
  );
  // Errors of requests no route answers (404, 405), in the words of the older version whose base path they are under.
  const unroutedMigrations = [...olderVersions.values()]
    .filter((older) => older.migratesResponses)
    .map((older) => ({ older, migrate: older.errorAnswers('') }));
  const sendUnrouted = unroutedErrors(
    unroutedMigrations.length === 0
      ? undefined
      : (url) => unroutedMigrations.find(({ older }) => older.serves(url))?.migrate,
  );
  const paths = new PathTable(served);
  // Each operation's onRequest hooks, filled as the glue builds its routes (before any request).
  const operationHooks = new Map<ContractOperation, RequestHook[]>();
  const hooksFor = (request: FastifyRequest) => {
    const operation = paths.match(request.url)?.operations.get(request.method);
    const hooks = operation === undefined ? [] : (operationHooks.get(operation) ?? []);
    return [standardHeaders, apiHeaders, ...hooks];
  };
  const httpMetrics = metrics && observeHttp(metrics);
  const onUnmatchedResponse = httpMetrics?.onUnmatchedResponse;
  const requestLog = new RequestLog();
  // HTTPS over Node's https server: the same request API, so the app keeps the HTTP server's types.
  const tls: object = https === undefined ? {} : { https };
  const app = Fastify({
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
    requestTimeout: connections.requestTimeoutMs,
    http: {
      headersTimeout: Math.min(5_000, connections.requestTimeoutMs),
      // Node checks the timeouts above this often (default 30 s: too coarse to be a limit).
      connectionsCheckingInterval: Math.min(1_000, connections.requestTimeoutMs / 4),
      // The framing plugin answers a missing Host with an Error body; Node's answer has none.
      requireHostHeader: false,
    },
    clientErrorHandler: clientErrorHandlerWith(metrics && ((status) => countUnparsable(metrics, status))),
    frameworkErrors: frameworkErrors(paths, hooksFor, onUnmatchedResponse, requestLog, sendUnrouted),
    // Every schema is compiled by the contract's rules (plugins/validation.ts). Given here rather
    // than with setValidatorCompiler, fastify never loads its default ajv compiler.
    schemaController: {
      compilersFactory: { buildValidator: contractValidatorFactory, buildSerializer: serializerFactory },
    },
    schemaErrorFormatter: validationFailure,
  });

  // @fastify/otel first: it instruments the routes and hooks added after it.
  if (tracing !== undefined) await app.register(tracing.plugin);
  adaptNodeServer(app.server, connections.maxConnections);
  app.addHook('onRequest', standardHeaders);
  // In development, refusals are sent like other answers, for the response check to see them.
  const refuse = refusals(development);
  // Before any route, so that each is observed.
  httpMetrics?.register(app);
  // Shedding comes before fastify sees the request: a shed must cost as little as possible.
  const deprecations = new Map(
    served.flatMap((version) =>
      version.operations.flatMap((operation) => {
        const headers = deprecationHeaders(operation, version.operations, version.basePath);
        return headers === undefined ? [] : [[operation, headers] as const];
      }),
    ),
  );
  const overloaded = overloadedError(overloadSettings);
  // A shed request's 503, prepared once per operation where it is not the overload error as it is:
  // every answer of a deprecated operation says so, a shed one too, and an older version's is in its words.
  const shedAnswers = new Map<ContractOperation, ShedAnswer>();
  for (const version of served) {
    const older = olderVersions.get(version);
    for (const operation of version.operations) {
      const extra = deprecations.get(operation);
      if (extra === undefined && older?.migratesResponses !== true) continue;
      const answer = older?.migratesResponses ? older.errorAnswers(operation.operationId)(overloaded) : undefined;
      const prepared = answer ?? overloaded.prepared;
      shedAnswers.set(operation, shedAnswer(prepared, Object.entries(extra ?? {}).flat(), answer?.status));
    }
  }
  const unroutedShed = unroutedMigrations.map(({ older, migrate }) => {
    const answer = migrate(overloaded);
    return { older, answer: shedAnswer(answer, [], answer.status) };
  });
  await app.register(overload, {
    settings: overloadSettings,
    metrics,
    requestId,
    bodyLimit: BODY_LIMIT,
    answerFor: (request) => {
      const url = request.url ?? '';
      const operation = paths.match(url)?.operations.get(request.method ?? '');
      if (operation !== undefined) return shedAnswers.get(operation);
      return unroutedShed.find(({ older }) => older.serves(url))?.answer;
    },
  });
  await app.register(framing);
  await app.register(errors, { sendUnrouted });
  await app.register(notFound, {
    paths,
    onUnmatchedResponse,
    unserved: UNSERVED_DOCS_PATHS,
    sendError: sendUnrouted,
  });
  await app.register(jsonBody);

  await app.register(health, { storage, overloaded: () => (app.isUnderPressure() ? overloaded : undefined) });
  await app.register(docs, { contracts: served, publicUrl });

  const dispatcher = new Dispatcher(
    storage.deliveries,
    webhooks,
    chain,
    metrics?.deliveries,
    (error) => app.log.error({ err: error }, 'webhook delivery failed'),
    tracing?.deliveries,
  );
  app.addHook('onReady', async () => dispatcher.start());
  app.addHook('onClose', async () => dispatcher.stop());
  const limits = await rateLimits(app, rateLimit, redis);
  // ioredis is 'ready' while connected; a hung server shows in the warning its timeouts log.
  if (redis !== undefined) metrics?.watchRedis(() => redis.status === 'ready');
  const authenticator = (refusal: Refuse) => {
    const bearer = bearerAuth(storage.accounts, refusal, { failures: limits.authFailure, perKey: limits.perKey }, now);
    return tracing?.authentication(bearer) ?? bearer;
  };
  const authenticate = authenticator(refuse);
  // Declared up front, so a request has the same shape before and after authentication sets it.
  app.decorateRequest('principal', undefined);
  const refuseEmptyPathParameter = emptyPathParameterIsUnroutable(paths);

  // The glue validates the contract again; with the build's compiled meta-schema that is cheap.
  await usePrecompiledMetaSchema();
  // Each version's routes, validation, scopes and deprecation from its own contract.
  for (const version of served) await app.register(async (api) => serveVersion(api, version));

  async function serveVersion(api: FastifyInstance, version: Contract): Promise<void> {
    // The newest version's handlers, answering under this version's base path.
    const handlers = serviceHandlers(storage, contract, webhooks, version.basePath);
    const major = majorOf(version);
    const operations = new Map(version.operations.map((operation) => [operation.operationId, operation]));
    const older = olderVersions.get(version);
    const [mockFor, responseCheck] = development
      ? await Promise.all([
          import('./dev/mock.js').then(({ contractMocks }) => contractMocks(version)),
          import('./dev/response-check.js').then(({ checkResponses }) => checkResponses(version)),
        ])
      : [];
    api.addHook('onRequest', apiHeaders);
    api.addHook('onRoute', keyJsonSchemasByBody);
    api.addHook('onRoute', validateEveryQueryString);
    if (responseCheck !== undefined) api.addHook('onSend', responseCheck);
    await api.register(openapiGlue, {
      specification: version.dereferenced,
      prefix: version.basePath,
      // Security comes from the contract but runs as onRequest, before the body is parsed:
      // the glue's own securityHandlers would run as a preHandler, after validation.
      operationResolver: (operationId: string): RouteOptions => {
        const operation = operations.get(operationId);
        // An operation the newest version no longer has is answered by the one a change names.
        const answering = chain.answeringOperation(major, operationId);
        const written = Object.hasOwn(handlers, answering) ? handlers[answering as keyof typeof handlers] : undefined;
        if (operation === undefined || (written === undefined && mockFor === undefined)) {
          throw new Error(`No handler for operation ${operationId}`);
        }
        const handler = written ?? mockFor?.(operation);
        // An older version's refusals in its own words; the newest version's as they are.
        const migrate: ErrorMigration | undefined = older?.migratesResponses
          ? older.errorAnswers(operationId)
          : undefined;
        const refuseHere = migrate === undefined ? refuse : refusals(development, migrate);
        const onRequest: RequestHook[] = [];
        if (operation.path.includes('{')) onRequest.push(refuseEmptyPathParameter);
        const deprecation = deprecations.get(operation);
        if (deprecation !== undefined) onRequest.push(markDeprecated(deprecation));
        // Per operation, after the deprecation headers, which every answer of a deprecated one carries.
        onRequest.push(refuseUnimplementedTransferCoding);
        if (operation.securitySchemes.length > 0) {
          onRequest.push(migrate === undefined ? authenticate : authenticator(refuseHere));
        }
        if (operation.scopes.length > 0) onRequest.push(requireScopes(operation.scopes, refuseHere));
        operationHooks.set(operation, onRequest);
        const preParsing =
          operation.requestMediaType === undefined
            ? [refuseAnyBody]
            : [refuseUnreadableBody(operation.requestMediaType), continueBeforeBody];
        // The glue merges these over the route it built (method, url, schema); its type wants a
        // whole route.
        const config = tracing?.routeConfig(operation, version.basePath);
        // An older version's request made the newest's once validated, its answer made its own before serialisation.
        const migrations = older && {
          ...(older.migratesRequests && { preHandler: older.requestUp(operationId) }),
          ...(older.migratesResponses && { preSerialization: older.responseDown(operationId) }),
        };
        return { handler, onRequest, preParsing, ...(config && { config }), ...migrations } as unknown as RouteOptions;
      },
    });
  }

  return app;
}
