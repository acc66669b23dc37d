import { randomUUID } from 'node:crypto';
import { type IncomingMessage, type OutgoingHttpHeaders, type Server, ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
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
import { ApiError, type ErrorBody, errorBody, shown } from '../errors.js';
import { pathOf, type PathTable } from '../path-table.js';
import { DATABASE_RETRY_AFTER_SECONDS, StorageUnavailableError } from '../storage/types.js';

export interface ErrorsOptions {
  paths: PathTable;
  /** Runs on every answer of the not-found handler (404, 405, an undecodable URL): metrics. */
  onUnmatchedResponse?: onResponseHookHandler | undefined;
  /** Fixed paths a plugin registers but does not serve (a 404 to every method, not a 405). */
  unserved?: readonly string[];
}

/** The Error body for a failure fastify or a hook raised; never fastify's own shape. */
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

const PARTS: Record<string, string> = { querystring: 'query', params: 'params', body: 'body', headers: 'headers' };

/**
 * Each `pattern` of the contract in words: a client reads what is wrong, not a regular
 * expression. test/validation.test.ts fails for a pattern of the contract missing here.
 */
export const PATTERN_WORDS: Record<string, string> = {
  '^(?!\\s*$)[^\\p{Cc}\\p{Cs}]+$': 'must contain a visible character and no control characters',
  '^[A-Za-z0-9_-]+$': 'must be only letters, digits, "-" and "_"',
  '^[\\x21-\\x7E]+$': 'must be only visible ASCII characters (no spaces)',
};

/** The words for the keywords whose Ajv message is not plain enough. */
function ruleInWords(keyword: string, params: Record<string, unknown>): string | undefined {
  const characters = (limit: unknown) => `${String(limit)} character${limit === 1 ? '' : 's'}`;
  if (keyword === 'pattern') return PATTERN_WORDS[String(params.pattern)] ?? 'is not in the form the contract gives';
  if (keyword === 'minLength') return `must be at least ${characters(params.limit)} long`;
  if (keyword === 'maxLength') return `must be at most ${characters(params.limit)} long`;
  return undefined;
}

/** `body/categoryId must be integer`: the first problem, naming the field or parameter. */
function describeValidation(error: FastifyError): string {
  const [first] = error.validation ?? [];
  const part = PARTS[error.validationContext ?? ''] ?? error.validationContext ?? 'request';
  if (first === undefined) return `${part} is invalid`;
  const where = `${part}${first.instancePath}`;
  const { params } = first;
  if (first.keyword === 'additionalProperties') {
    return `${where}/${String(params.additionalProperty)} is not an allowed field`;
  }
  if (first.keyword === 'required') return `${where}/${String(params.missingProperty)} is required`;
  if (first.keyword === 'type' && where === 'body') return 'body must be a JSON object';
  if (first.keyword === 'enum') {
    return `${where} must be one of ${(params.allowedValues as unknown[]).join(', ')}`;
  }
  return `${where} ${ruleInWords(first.keyword, params) ?? first.message ?? 'is invalid'}`;
}

/** Before a refusal from the headers: a body too large or of unknown length closes the connection. */
function closeIfLargeBodyToCome(reply: FastifyReply): void {
  if (largeBodyToCome(reply.request)) {
    reply.header('connection', 'close');
    closeLingeringAfterAnswer(reply.request.raw.socket);
  }
}

/** Sets the status and headers of an Error answer and returns its body. */
function prepareErrorReply(reply: FastifyReply, error: ApiError): ErrorBody {
  closeIfLargeBodyToCome(reply);
  // Also on a 404 or 405, which no route's hooks (and so no API headers) reach: a cache could keep those.
  reply.header('cache-control', 'no-store');
  reply.code(error.statusCode).headers(error.headers);
  return error.toBody();
}

function send(reply: FastifyReply, error: ApiError): FastifyReply {
  return reply.send(prepareErrorReply(reply, error));
}

/**
 * Answers a refusal decided in an onRequest hook (401, 429, 503); the hook then returns (or calls
 * `done`) without an error, and no hook after it runs, nor the handler.
 */
export type Refuse = (reply: FastifyReply, error: ApiError) => void;

/**
 * Writes the refusal at once, its body and fixed headers prepared once per error
 * (ApiError.prepared), with the headers the hooks before set (request id, API and deprecation
 * headers, RateLimit). Fastify's error handler, serializer and onSend hooks are skipped: a refusal
 * must cost little, most of all while shedding. The onResponse hooks (metrics) and the log line
 * still run, on the response's 'finish'.
 */
const writeRefusal: Refuse = (reply, error) => {
  closeIfLargeBodyToCome(reply);
  const { body, headers } = error.prepared;
  // Whatever the hooks set is a valid header value: fastify would write the same object.
  const all = Object.assign(reply.getHeaders(), headers) as OutgoingHttpHeaders;
  reply.raw.writeHead(error.statusCode, all).end(body);
};

/**
 * How refusals are answered: written at once, or, with `throughSend`, sent like any other answer
 * (serializer, onSend hooks) for `npm run dev`, whose onSend hook checks every response against
 * the contract.
 */
export function refusals(throughSend: boolean): Refuse {
  return throughSend ? (reply, error) => void send(reply, error) : writeRefusal;
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

/** largeBodyToCome for a request not yet routed (a shed one, overload.ts): `limit()` is its body limit. */
export function moreBodyThan(request: IncomingMessage, limit: () => number): boolean {
  const { headers, complete } = request;
  if (complete) return false;
  if (headers['transfer-encoding'] !== undefined) return true;
  const length = headers['content-length'];
  return length !== undefined && Number(length) > limit();
}

/**
 * How long a connection is kept after its closing answer, for the client to read it and close.
 * Closing at once while the client is still sending makes the kernel reset the connection, and a
 * client that reads only after sending (Node's http, Python's http.client) loses the answer;
 * waiting without a bound would let a client that ignores the answer hold the connection, against
 * MAX_CONNECTIONS and a graceful shutdown.
 */
const CLOSE_LINGER_MS = 1_000;

/** Ends the connection (the client sees the end after the answer) and closes it once the client has or the linger is over. */
function closeLingering(socket: Socket): void {
  if (!socket.writableEnded) socket.end();
  const linger = setTimeout(() => socket.destroy(), CLOSE_LINGER_MS);
  socket.once('close', () => clearTimeout(linger));
}

/**
 * Node closes a `Connection: close` connection with `destroySoon` once the answer is written, at
 * once; this socket closes lingering instead, while Node reads and drops what the client still sends.
 */
export function closeLingeringAfterAnswer(socket: Socket): void {
  socket.destroySoon = () => closeLingering(socket);
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
  hooksFor: (request: FastifyRequest) => RequestHook[],
  /** fastify runs no onResponse hook for these answers, nor logs them: these run once each is written. */
  onResponse?: onResponseHookHandler,
  requestLog?: LogController,
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
      () => (reply.sent ? undefined : send(reply, answer)),
      (error: unknown) => send(reply, toApiError(error as Error)),
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

/**
 * Connections whose request was answered before its body had all arrived: a refusal from the
 * headers (401, 404, 405, a shed 503), or an answer that never reads a body (GET /healthz sent
 * one). Node reads the rest and drops it; if it never comes, Node's request timeout would answer
 * the same request a second time, with a 408, so such a connection is closed instead.
 */
const answeredBeforeItsBody = new WeakSet<Socket>();

/** Watches every request that announces a body, on `server`, for an answer that comes before the body. */
export function watchAnswersBeforeBody(server: Server): void {
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const { headers } = request;
    if (headers['content-length'] === undefined && headers['transfer-encoding'] === undefined) return;
    const answered = () => {
      if (request.complete) return;
      answeredBeforeItsBody.add(request.socket);
      request.once('end', () => answeredBeforeItsBody.delete(request.socket));
    };
    if (response.writableFinished) answered();
    else response.once('finish', answered);
  });
}

/** Node's own handler reads this too: the response a connection is writing, if any. */
function responseOnItsWay(socket: Socket): ServerResponse | undefined {
  return (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;
}

/**
 * Whether earlier requests on the connection, which arrived whole, are still being answered (an
 * incomplete one is the request that failed). An answer written now would come first and be taken
 * as theirs.
 */
function answersOnTheirWay(socket: Socket): boolean {
  return responseOnItsWay(socket)?.req.complete === true;
}

/** Lets every answer on its way finish, then closes: what could not be parsed gets no answer. */
function closeAfterAnswers(socket: Socket): void {
  const response = responseOnItsWay(socket);
  if (response === undefined || response.writableFinished) {
    closeLingering(socket);
    return;
  }
  // Node hands the connection to the next queued response as this one finishes.
  response.once('finish', () => closeAfterAnswers(socket));
}

/**
 * Answers HTTP parse errors and timeouts on the raw socket (no request object exists yet), then
 * closes the connection, lingering. `onAnswer` is told each status written (metrics).
 */
export function clientErrorHandlerWith(onAnswer?: (status: number) => void) {
  return function clientErrorHandler(this: FastifyInstance, error: Error & { code?: string }, socket: Socket): void {
    answerClientError(this, error, socket, onAnswer);
  };
}

export const clientErrorHandler = clientErrorHandlerWith();

function answerClientError(
  app: FastifyInstance,
  error: Error & { code?: string },
  socket: Socket,
  onAnswer: ((status: number) => void) | undefined,
): void {
  if (!socket.writable || error.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT' && answeredBeforeItsBody.has(socket)) {
    // Its answer is written: the client stopped sending the body it announced.
    closeLingering(socket);
    return;
  }
  if (answersOnTheirWay(socket)) {
    app.log.info({ code: error.code }, 'unparsable request after others on the connection: closed after their answers');
    closeAfterAnswers(socket);
    return;
  }
  const [status, body] = clientErrorResponse(error.code);
  const json = JSON.stringify(body);
  // No request object exists, so no request line: this one ties the answer's X-Request-Id to the log.
  const reqId = randomUUID();
  app.log.info({ reqId, statusCode: status, code: error.code }, 'request not parsed');
  onAnswer?.(status);
  socket.write(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(json)}\r\nX-Request-Id: ${reqId}\r\n` +
      'X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n' +
      json,
  );
  closeLingering(socket);
}

/**
 * Node hands a CONNECT request to the server's 'connect' listeners with the bare socket, and with
 * none destroys it unanswered. This one serves it as a request like any other: the not-found
 * handler answers it (a 405 or 404, or a 400 for a `host:port` target), counted and logged as
 * others are; then the connection closes, as Node reads no more HTTP on it.
 */
export function serveConnectAsRequest(server: Server) {
  return (request: IncomingMessage, socket: Socket): void => {
    // Node took its own listeners off the socket: a reset is no longer reported, nor worth reporting.
    socket.on('error', () => undefined);
    // Whatever the client sends next is dropped, so its end is seen and the connection can close.
    socket.resume();
    const response = new ServerResponse(request);
    response.shouldKeepAlive = false;
    response.assignSocket(socket);
    // The response's 'close', which fastify and the metrics wait for, comes with the socket's.
    response.once('finish', () => closeLingering(socket));
    server.emit('request', request, response);
  };
}

function clientErrorResponse(code: string | undefined): [number, ErrorBody] {
  switch (code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return [408, errorBody(408, 'request_timeout', 'The request took too long to arrive')];
    case 'HPE_HEADER_OVERFLOW':
      return [431, errorBody(431, 'headers_too_large', 'Request headers are too large')];
    default:
      return [400, errorBody(400, 'invalid_request', 'Malformed HTTP request')];
  }
}

async function errorsPlugin(app: FastifyInstance, options: ErrorsOptions): Promise<void> {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const apiError = toApiError(error);
    if (apiError.statusCode >= 500) request.log.error({ err: error }, 'request failed');
    return send(reply, apiError);
  });

  // Decided in onRequest, before any body is read: a body sent to a wrong path or method is not
  // parsed, so it cannot turn the 404 or 405 into a 400 or 413.
  // fastify takes any lifecycle hook for the not-found context here, though its types name two.
  const notFoundHooks = { onResponse: options.onUnmatchedResponse } as object;
  app.setNotFoundHandler(notFoundHooks, (request, reply) => send(reply, unroutable(request, options.paths)));
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

export default fp(errorsPlugin, { name: 'errors' });
