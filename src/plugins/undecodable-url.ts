import type { IncomingMessage } from 'node:http';
import type { FastifyRequest, preParsingHookHandler } from 'fastify';
import { ApiError } from '../domain/errors.js';
import type { PathTable } from '../contract/path-table.js';

/** The longest path parameter taken, decoded (find-my-way's default limit, which this check replaces). */
export const PATH_PARAMETER_LIMIT = 100;

/**
 * What routes an undecodable segment: no static segment of any served path is spelled so, so it
 * reaches a path parameter or nothing.
 */
const PLACEHOLDER = '-';

/**
 * Requests whose URL the router could not have routed as sent: a segment undecodable, or over the
 * limit. One that reaches no route gets the 404 or 405 of any path nothing is served on.
 */
const marked = new WeakMap<IncomingMessage, 'undecodable' | 'long'>();

/**
 * fastify's `rewriteUrl`: called before routing, for every request. A path segment that is not
 * correctly percent-encoded is replaced with a placeholder, so that the request still reaches the
 * operation it names and goes through its hooks (authentication first) before its 400; one longer
 * than the limit is kept, and refused the same way (`refuseUndecodableUrl`). Either is marked.
 * `request.originalUrl` keeps the URL as sent.
 */
export function rewriteUndecodable(request: IncomingMessage): string {
  const url = request.url ?? '/';
  // Most URLs: short, nothing percent-encoded.
  if (url.length <= PATH_PARAMETER_LIMIT && !url.includes('%')) return url;
  const start = pathStart(url);
  if (start === -1) return url;
  let end = url.length;
  for (const delimiter of ['?', '#']) {
    const at = url.indexOf(delimiter, start);
    if (at !== -1 && at < end) end = at;
  }
  const path = url.slice(start, end);
  if (path.length <= PATH_PARAMETER_LIMIT && !path.includes('%')) return url;
  let undecodable = false;
  let long = false;
  const segments = path.split('/');
  for (const [index, segment] of segments.entries()) {
    try {
      if (decodeURIComponent(segment).length > PATH_PARAMETER_LIMIT) long = true;
    } catch {
      undecodable = true;
      segments[index] = PLACEHOLDER;
    }
  }
  if (undecodable) {
    marked.set(request, 'undecodable');
    return `${url.slice(0, start)}${segments.join('/')}${url.slice(end)}`;
  }
  if (long) marked.set(request, 'long');
  return url;
}

/** Where a request target's path begins: at once (origin form), after an absolute URL's authority, or nowhere (`*`, `host:port`). */
function pathStart(url: string): number {
  if (url.startsWith('/')) return 0;
  const scheme = url.indexOf('://');
  return scheme === -1 ? -1 : url.indexOf('/', scheme + 3);
}

/** The 400 for a URL the router cannot decode, naming the path parameters it may be about. */
export function undecodableUrl(request: FastifyRequest, paths: PathTable): ApiError {
  const parameters = paths.match(request.originalUrl)?.parameters ?? [];
  const what = parameters.length === 0 ? 'The URL' : parameters.map((name) => `params/${name}`).join(' or ');
  return new ApiError(400, 'invalid_request', `${what} is not correctly percent-encoded, or is too long`);
}

/**
 * A global preParsing hook: after the route's onRequest hooks (authentication, scopes, the
 * deprecation headers) and before any body is read, a request routed with a placeholder, or with
 * a path parameter over the limit, gets its 400 through the error handler, in its version's words.
 */
export function refuseUndecodableUrl(paths: PathTable): preParsingHookHandler {
  return function refuseUndecodable(request, _reply, payload, done) {
    const why = marked.get(request.raw);
    if (why === undefined || (why === 'long' && !hasLongParameter(request))) {
      done(null, payload);
      return;
    }
    done(undecodableUrl(request, paths));
  };
}

/** A named path parameter over the limit (a wildcard, as /docs/static/* has, has none). */
function hasLongParameter(request: FastifyRequest): boolean {
  const parameters = request.params as Record<string, string>;
  for (const name in parameters) {
    if (name !== '*' && (parameters[name]?.length ?? 0) > PATH_PARAMETER_LIMIT) return true;
  }
  return false;
}
