import { errorCodes, type FastifyInstance, type preParsingHookHandler, type RouteOptions } from 'fastify';
import openapiGlue from 'fastify-openapi-glue';
import type { Contract } from '../contract/document.js';
import type { WebhookSettings } from '../events/settings.js';
import { serviceHandlers } from '../handlers/index.js';
import { PROBLEM_MEDIA_TYPE } from '../contract/media-types.js';
import { JSON_MEDIA_TYPES, refuseAnyBody, refuseUnreadableBody } from '../plugins/json-body.js';
import { validateEveryQueryString } from '../plugins/validation.js';
import type { Storage } from '../storage/types.js';
import type { Tracing } from '../tracing/opentelemetry.js';
import { apiHeaders, type OperationHooks } from './operation-hooks.js';
import type { ServedVersions } from './versions.js';

export interface VersionRoutesOptions {
  /** The version whose routes these are. */
  version: Contract;
  versions: ServedVersions;
  /** The newest version's contract: what the handlers are written against. */
  newest: Contract;
  storage: Storage;
  webhooks: WebhookSettings;
  hooks: OperationHooks;
  /** Operations without a handler answered from the contract, every response checked against it. */
  development: boolean;
  tracing?: Tracing | undefined;
}

const EXPECT_CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

/** Sends `100 Continue` to a client waiting for it, once the hooks have let its body be read. */
const continueBeforeBody: preParsingHookHandler = (request, reply, payload, done) => {
  if (EXPECT_CONTINUE.test(request.headers.expect ?? '')) reply.raw.writeContinue();
  done(null, payload);
};

interface MediaTypeMap {
  content?: Record<string, { schema?: unknown }>;
}

/** The JSON media types of bodies: a request's, and an answer's, which an error's problem detail is too. */
const BODY_MEDIA_TYPES: readonly string[] = [...JSON_MEDIA_TYPES, PROBLEM_MEDIA_TYPE];

/** The schema of a body the contract gives in one JSON media type and no other. */
function onlyJsonSchema(part: unknown): unknown {
  const content = (part as MediaTypeMap | undefined)?.content;
  const [mediaType, ...others] = Object.keys(content ?? {});
  if (mediaType === undefined || others.length > 0) return undefined;
  return BODY_MEDIA_TYPES.includes(mediaType) ? content?.[mediaType]?.schema : undefined;
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

/**
 * One version's routes, built by fastify-openapi-glue from its own contract under its base path:
 * the newest version's handlers, each operation's hooks (operation-hooks.ts), its body rules, and
 * for an older version the migrations of its requests up and its answers down.
 */
export async function versionRoutes(
  api: FastifyInstance,
  { version, versions, newest, storage, webhooks, hooks, development, tracing }: VersionRoutesOptions,
): Promise<void> {
  const handlers = serviceHandlers(storage, newest, webhooks, version.basePath);
  const major = versions.majorOf(version);
  const operations = new Map(version.operations.map((operation) => [operation.operationId, operation]));
  const older = versions.migrating.get(version);
  const [mockFor, responseCheck] = development
    ? await Promise.all([
        import('../dev/mock.js').then(({ contractMocks }) => contractMocks(version)),
        import('../dev/response-check.js').then(({ checkResponses }) => checkResponses(version)),
      ])
    : [];
  api.addHook('onRequest', apiHeaders);
  api.addHook('onRoute', keyJsonSchemasByBody);
  api.addHook('onRoute', validateEveryQueryString);
  if (responseCheck !== undefined) api.addHook('onSend', responseCheck);
  // The glue warns, at every start, of a missing parser for each media type the contract names,
  // answers' included. A problem detail is only ever answered: a request sent in that type is
  // refused (preParsing) as any type its operation does not take, so this parser is never reached.
  if (!api.hasContentTypeParser(PROBLEM_MEDIA_TYPE)) {
    api.addContentTypeParser(PROBLEM_MEDIA_TYPE, (_request, _payload, done) => {
      done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE(PROBLEM_MEDIA_TYPE), undefined);
    });
  }
  await api.register(openapiGlue, {
    specification: version.dereferenced,
    prefix: version.basePath,
    operationResolver: (operationId: string): RouteOptions => {
      const operation = operations.get(operationId);
      // An operation the newest version no longer has is answered by the one a change names.
      const answering = versions.chain.answeringOperation(major, operationId);
      const written = Object.hasOwn(handlers, answering) ? handlers[answering as keyof typeof handlers] : undefined;
      if (operation === undefined || (written === undefined && mockFor === undefined)) {
        throw new Error(`No handler for operation ${operationId}`);
      }
      const handler = written ?? mockFor?.(operation);
      const preParsing =
        operation.requestMediaType === undefined
          ? [refuseAnyBody]
          : [refuseUnreadableBody(operation.requestMediaType), continueBeforeBody];
      const config = tracing?.routeConfig(operation, version.basePath);
      // An older version's request made the newest's once validated, its answer made its own before serialisation.
      const migrations = older && {
        ...(older.migratesRequests && { preHandler: older.requestUp(operationId) }),
        ...(older.migratesResponses && { preSerialization: older.responseDown(operationId) }),
      };
      // The glue merges these over the route it built (method, url, schema); its type wants a whole route.
      const route = {
        handler,
        onRequest: [...hooks.of(operation)],
        preParsing,
        ...(config && { config }),
        ...migrations,
      };
      return route as unknown as RouteOptions;
    },
  });
}
