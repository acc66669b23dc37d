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
import { send } from './errors.js';
import { refuseUndecodableUrl, undecodableUrl } from './undecodable-url.js';

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

/**
 * fastify's `frameworkErrors`, for a request target the router rejects before matching it: in
 * practice only an absolute-form target it cannot parse (a fragment, no host), as the URLs it
 * cannot decode are routed (undecodable-url.ts). It matches no operation, so no hook is owed to
 * it; fastify runs no onResponse hook for it, nor logs it, so those run once it is written.
 */
export function frameworkErrors(
  paths: PathTable,
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
    sendError(reply, undecodableUrl(request, paths));
  };
}

/**
 * The 404 for an unknown path, or the 405 (with Allow) for a known path and another method; a 400
 * for a request target that is no path (`CONNECT host:443`, `OPTIONS *`): this server is no proxy.
 */
export function unroutable(request: FastifyRequest, paths: PathTable): ApiError {
  return unroutableTarget(request.method, request.originalUrl, paths);
}

/** `unroutable` for a method and request target as sent (a CONNECT, which no request object serves). */
export function unroutableTarget(method: string, target: string, paths: PathTable): ApiError {
  const path = pathOf(target);
  if (!path.startsWith('/')) {
    return new ApiError(400, 'invalid_request', `The request target must be a path; got ${shown(path)}`);
  }
  const known = paths.match(path);
  if (known === undefined) return new ApiError(404, 'not_found', `No route for ${method} ${shown(path)}`);
  return new ApiError(405, 'method_not_allowed', `Method ${method} is not allowed on ${shown(path)}`, {
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
  // A URL routed with a placeholder (undecodable-url.ts): refused after the route's onRequest hooks.
  app.addHook('preParsing', refuseUndecodableUrl(options.paths));
}

export default fp(notFoundPlugin, { name: 'not-found' });
