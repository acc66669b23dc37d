import type {
  FastifyError,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  LogController,
  onRequestAsyncHookHandler,
  onRequestHookHandler,
  onResponseHookHandler,
} from 'fastify';
import fp from 'fastify-plugin';
import { ApiError, shown } from '../domain/errors.js';
import { pathOf, type PathTable } from '../contract/path-table.js';
import { send, toApiError } from './errors.js';
import { recordFailure } from './request-log.js';

export interface NotFoundOptions {
  paths: PathTable;
  /** Runs on every answer of the not-found handler (404, 405, an undecodable URL): metrics. */
  onUnmatchedResponse?: onResponseHookHandler | undefined;
  /** Fixed paths a plugin registers but does not serve (a 404 to every method, not a 405). */
  unserved?: readonly string[];
  /** How the 404 or 405 is sent (plugins/errors.ts, `unroutedErrors`: an older version's in its words). */
  sendError?: (reply: FastifyReply, error: ApiError) => FastifyReply;
}

/** An `onRequest` hook in either of fastify's styles: calling `done`, or returning a promise. */
export type RequestHook = onRequestHookHandler | onRequestAsyncHookHandler;

/** Runs a hook outside fastify's hook runner, as that runner would. */
function runHook(hook: RequestHook, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (error?: Error) => {
      if (error === undefined) resolve();
      else reject(error);
    };
    // Either style: a callback hook answers through `done`, an async one with the promise it returns.
    const invoke = hook as (this: unknown, ...args: unknown[]) => unknown;
    const result = invoke.call(request.server, request, reply, done);
    if (result instanceof Promise) result.then(() => resolve(), reject);
  });
}

/**
 * Answers a URL the router cannot decode (bad percent-encoding, a parameter over its length
 * limit). No route runs for it, so it first goes through the hooks of the operation it names, if
 * any (`hooksFor`): authentication still comes before the 400, and the headers are the same.
 */
export function frameworkErrors(
  paths: PathTable,
  hooksFor: (request: FastifyRequest) => readonly RequestHook[],
  /** fastify runs no onResponse hook for these answers, nor logs them: these run once each is written. */
  onResponse?: onResponseHookHandler,
  requestLog?: LogController,
  sendError: (reply: FastifyReply, error: ApiError) => FastifyReply = send,
) {
  const noop = () => undefined;
  return (_error: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    reply.raw.once('finish', () => {
      onResponse?.call(request.server, request, reply, noop);
      requestLog?.requestCompleted(undefined, request, reply);
    });
    const parameters = paths.match(request.url)?.parameters ?? [];
    const what = parameters.length === 0 ? 'The URL' : parameters.map((name) => `params/${name}`).join(' or ');
    const answer = new ApiError(400, 'invalid_request', `${what} is not correctly percent-encoded, or is too long`);
    const runHooks = async () => {
      for (const hook of hooksFor(request)) await runHook(hook, request, reply);
    };
    runHooks().then(
      // A hook may have refused (a Refuse): that is the answer.
      () => (reply.sent ? undefined : sendError(reply, answer)),
      (error: unknown) => {
        const failure = toApiError(error as Error);
        // A hook's fault (the database, say) is logged once, with the request's line.
        if (failure.statusCode >= 500) recordFailure(request, error as Error);
        return sendError(reply, failure);
      },
    );
  };
}

/**
 * The 404 for an unknown path, or the 405 (with Allow) for a known path and another method; a 400
 * for a request target that is no path (`CONNECT host:443`, `OPTIONS *`): this server is no proxy.
 */
export function unroutable(request: FastifyRequest, paths: PathTable): ApiError {
  const path = pathOf(request.url);
  if (!path.startsWith('/')) {
    return new ApiError(400, 'invalid_request', `The request target must be a path; got ${shown(path)}`);
  }
  const known = paths.match(path);
  if (known === undefined) return new ApiError(404, 'not_found', `No route for ${request.method} ${shown(path)}`);
  return new ApiError(405, 'method_not_allowed', `Method ${request.method} is not allowed on ${shown(path)}`, {
    allow: known.allow,
  });
}

/**
 * For an operation with path parameters: fastify's router lets a parameter be empty (`/v1/pets/`
 * is getPet with petId ''), but an empty segment names no resource. It is answered as any path
 * nothing is served on (404, or 405 for another method), before authentication, as those are.
 */
export function emptyPathParameterIsUnroutable(paths: PathTable): onRequestHookHandler {
  return function refuseEmptyPathParameter(request, _reply, done) {
    const parameters = request.params as Record<string, string>;
    for (const name in parameters) {
      if (parameters[name] === '') {
        done(unroutable(request, paths));
        return;
      }
    }
    done();
  };
}

async function notFoundPlugin(app: FastifyInstance, options: NotFoundOptions): Promise<void> {
  // Decided in onRequest, before any body is read: a body sent to a wrong path or method is not
  // parsed, so it cannot turn the 404 or 405 into a 400 or 413.
  // fastify takes any lifecycle hook for the not-found context here, though its types name two.
  const notFoundHooks = { onResponse: options.onUnmatchedResponse } as object;
  const sendError = options.sendError ?? send;
  app.setNotFoundHandler(notFoundHooks, (request, reply) => sendError(reply, unroutable(request, options.paths)));
  // A route on a fixed path outside the contract (/healthz, the contract documents, /docs) gets the
  // contract's 405 for other methods. A path with a wildcard or parameter (/docs/static/*, files
  // that may or may not exist) keeps the 404.
  app.addHook('onRoute', (route) => {
    const known = options.paths.match(route.url);
    if (/[:*]/.test(route.url) || (known !== undefined && known.operations.size > 0)) return;
    if (options.unserved?.includes(route.url) === true) return;
    const methods = [route.method].flat();
    options.paths.serve(route.url, methods);
    // A prefix's root route (`/` in the /docs plugin) is served at `/docs` and, without telling
    // onRoute, at `/docs/`.
    if (route.routePath === '' && route.prefixTrailingSlash !== 'no-slash')
      options.paths.serve(`${route.url}/`, methods);
  });
  app.addHook('onRequest', function rejectUnroutable(request, _reply, done) {
    done(request.is404 ? unroutable(request, options.paths) : undefined);
  });
}

export default fp(notFoundPlugin, { name: 'not-found' });
