import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onRequestHookHandler,
  onResponseHookHandler,
  RouteOptions,
} from 'fastify';
import type { Metrics, RejectionCause } from './registry.js';
import type { CounterSeries, HistogramSeries } from './series.js';

/** The operation label of requests no route matched (404, 405, a URL that cannot be decoded). */
export const UNMATCHED = 'unmatched';
/** The operation label of requests that could not be parsed as HTTP (no request object exists). */
export const UNPARSABLE = 'unparsable';

// Node's parser takes some thirty methods; only these are named, so a client's choice of method
// adds at most this many series.
const NAMED_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** The method label of a request no route matched, or shed before routing. */
export function methodLabel(method: string | undefined): string {
  return method !== undefined && NAMED_METHODS.has(method) ? method : 'other';
}

function rejectionCause(status: number, request: FastifyRequest): RejectionCause | undefined {
  switch (status) {
    case 400:
    case 413:
    case 415:
      return 'validation';
    case 401:
      return 'authentication';
    case 429:
      // The per-key limit runs after authentication; the failed-authentication limit instead of it.
      return request.principal === undefined ? 'authentication_limit' : 'rate_limit';
    default:
      // 503 for overload is counted where it is decided (overload.ts): a 503 is also a database fault.
      return undefined;
  }
}

interface MethodSeries {
  timed: HistogramSeries;
  /** The counter's series for each status this method has answered with. */
  counted: Map<number, CounterSeries>;
}

/**
 * One onResponse hook for one route: its label values are fixed when the route is built and each
 * series is resolved once, so a response costs two map lookups and three additions.
 */
function observer(metrics: Metrics, operation: string, fixedMethod: string | undefined): onResponseHookHandler {
  const byMethod = new Map<string, MethodSeries>();
  return function observeResponse(request: FastifyRequest, reply: FastifyReply, done: () => void) {
    const method = fixedMethod ?? methodLabel(request.method);
    const status = reply.statusCode;
    let series = byMethod.get(method);
    if (series === undefined) {
      series = { timed: metrics.requestDuration.series({ method, operation }), counted: new Map() };
      byMethod.set(method, series);
    }
    let counted = series.counted.get(status);
    if (counted === undefined) {
      counted = metrics.requests.series({ method, operation, status: String(status) });
      series.counted.set(status, counted);
    }
    counted.inc();
    series.timed.observe(reply.elapsedTime / 1000);
    if (status >= 400) {
      const cause = rejectionCause(status, request);
      if (cause !== undefined) metrics.rejected(cause);
    } else if (status === 201 && reply.hasHeader('idempotent-replayed')) {
      metrics.idempotentReplays.inc();
    }
    done();
  };
}

function withHook<T>(hooks: T | T[] | undefined, hook: T): T[] {
  if (hooks === undefined) return [hook];
  return Array.isArray(hooks) ? [...hooks, hook] : [hooks, hook];
}

export interface HttpMetrics {
  /** Adds the hooks to `app`; call before any route is added, so that each route is observed. */
  register(app: FastifyInstance): void;
  /** For the not-found handler, which answers every request no route matched. */
  onUnmatchedResponse: onResponseHookHandler;
}

/**
 * Counts and times every response by operation: each route gets its own onResponse hook,
 * labelled by the contract's operationId (or, for routes outside the contract such as /healthz,
 * by their path pattern).
 */
export function observeHttp(metrics: Metrics): HttpMetrics {
  const leave = () => {
    metrics.inFlight -= 1;
  };
  // 'close' comes once per response, whether it was written or the client went away.
  const arrive: onRequestHookHandler = (_request, reply, done) => {
    metrics.inFlight += 1;
    reply.raw.on('close', leave);
    done();
  };
  return {
    register(app) {
      app.addHook('onRequest', arrive);
      app.addHook('onRoute', (route: RouteOptions) => {
        const operationId = (route.schema as { operationId?: unknown } | undefined)?.operationId;
        const operation = typeof operationId === 'string' ? operationId : route.url;
        const method = Array.isArray(route.method) ? undefined : route.method;
        const hooks = route.onResponse as onResponseHookHandler | onResponseHookHandler[] | undefined;
        route.onResponse = withHook(hooks, observer(metrics, operation, method));
      });
    },
    onUnmatchedResponse: observer(metrics, UNMATCHED, undefined),
  };
}

/**
 * Counts an answer written on the socket to a request no route serves (a CONNECT: http/connect.ts),
 * as the not-found handler's are counted; it took no measurable time, so it is timed as none.
 */
export function countUnmatched(metrics: Metrics, method: string, status: number): void {
  const labels = { method: methodLabel(method), operation: UNMATCHED };
  metrics.requests.inc({ ...labels, status: String(status) });
  metrics.requestDuration.series(labels).observe(0);
  if (status === 400) metrics.rejected('validation');
}

/** Counts an answer written for a request that could not be parsed (400, 408, 431). */
export function countUnparsable(metrics: Metrics, status: number): void {
  metrics.requests.inc({ method: 'other', operation: UNPARSABLE, status: String(status) });
  if (status === 400 || status === 431) metrics.rejected('validation');
}
