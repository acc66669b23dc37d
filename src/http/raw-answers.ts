import { randomUUID } from 'node:crypto';
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { ApiError, type PreparedAnswer } from '../domain/errors.js';
import { closeLingering, isClosing } from './lingering-close.js';

// Answers written by hand on the socket, to requests Node could not parse or that timed out (no
// request object exists for them, so fastify never sees them), and to a CONNECT (http/connect.ts).

/**
 * Connections whose request was answered before its body had all arrived: a refusal from the
 * headers (401, 404, 405, a shed 503), or an answer that never reads a body (GET /healthz sent
 * one). Node reads the rest and drops it; if it never comes, Node's request timeout would answer
 * the same request a second time, with a 408, so such a connection is closed instead.
 */
const answeredBeforeItsBody = new WeakSet<Socket>();

/**
 * Each connection's responses not yet finished, oldest first: Node writes them in that order, one
 * at a time. Kept from the request listener (watchAnswers) rather than read from Node's socket,
 * whose record of the response it is writing is not public. Pruned from the front only, as each
 * request arrives, so the last is always that of the latest request on the connection.
 */
const unfinished = new WeakMap<Socket, ServerResponse[]>();

/**
 * Called by the server's request listener for every request (node-server.ts): keeps what an
 * answer written on the raw socket must know of the answers already on their way.
 */
export function watchAnswers(request: IncomingMessage, response: ServerResponse): void {
  const { socket } = request;
  const responses = unfinished.get(socket);
  if (responses === undefined) unfinished.set(socket, [response]);
  else {
    while (responses[0]?.writableFinished === true) responses.shift();
    responses.push(response);
  }
  const { headers } = request;
  if (headers['content-length'] === undefined && headers['transfer-encoding'] === undefined) return;
  const answered = () => {
    if (request.complete) return;
    answeredBeforeItsBody.add(socket);
    request.once('end', () => answeredBeforeItsBody.delete(socket));
  };
  if (response.writableFinished) answered();
  else response.once('finish', answered);
}

/** The response a connection is writing, if any: the oldest not finished. */
function responseOnItsWay(socket: Socket): ServerResponse | undefined {
  return unfinished.get(socket)?.find((response) => !response.writableFinished);
}

/**
 * Whether earlier requests on the connection, which arrived whole, are still being answered (an
 * incomplete one is the request that failed). An answer written now would come first and be taken
 * as theirs.
 */
function answersOnTheirWay(socket: Socket): boolean {
  return responseOnItsWay(socket)?.req.complete === true;
}

/** Whether the request that failed was answered already, from its headers, while its body was still coming. */
function answeredWhileItsBodyCame(socket: Socket): boolean {
  const response = responseOnItsWay(socket);
  return response !== undefined && response.writableEnded && !response.req.complete;
}

/** Calls `then` once every answer on its way on the connection is written: at once when none is. */
export function afterAnswersOnTheirWay(socket: Socket, then: () => void): void {
  const response = responseOnItsWay(socket);
  if (response === undefined || response.writableFinished) {
    then();
    return;
  }
  // Node hands the connection to the next queued response as this one finishes.
  response.once('finish', () => afterAnswersOnTheirWay(socket, then));
}

/** Lets every answer on its way finish, then closes: what could not be parsed gets no answer. */
function closeAfterAnswers(socket: Socket): void {
  afterAnswersOnTheirWay(socket, () => closeLingering(socket));
}

/** An error as the version a request target is under gives it (`undefined`: the target could not be read). */
export type AnswerFor = (target: string | undefined, error: ApiError) => PreparedAnswer & { status: number };

/** By default, as the newest version gives it. */
const asNewest: AnswerFor = (_target, error) => ({ status: error.statusCode, ...error.prepared });

/** A parse error as Node reports it ('clientError'): `rawPacket` is the chunk it failed on, when it failed on one. */
type ClientError = Error & { code?: string | undefined; rawPacket?: unknown };

/**
 * Answers HTTP parse errors and timeouts on the raw socket (no request object exists yet), then
 * closes the connection, lingering. `onAnswer` is told each status written (metrics); `answerFor`
 * gives the error in the words of the version whose base path the request target is under.
 */
export function clientErrorHandlerWith(onAnswer?: (status: number) => void, answerFor: AnswerFor = asNewest) {
  return function clientErrorHandler(this: FastifyInstance, error: ClientError, socket: Socket): void {
    answerClientError(this, error, socket, onAnswer, answerFor);
  };
}

/** The longest request line read for its target: the server's whole header limit is more than any path. */
const REQUEST_LINE_LIMIT = 8 * 1024;
const REQUEST_LINE = /^[!#-'*+.^-z|~0-9A-Z]+ (\S+) HTTP\/1\.[01]\r?\n/;

/**
 * The request target of the request that failed, where it can be read: from the latest request on
 * the connection, if its body is still coming (Node made a request of it once its headers had all
 * arrived, and the request listener kept its response), or else from the request line the chunk
 * Node failed on begins with (headers too large, sent at once; a malformed header line). Otherwise
 * (headers too slow, too large over several chunks, or a chunk that does not begin a request) no
 * request line is kept to read it from.
 */
function targetOf(error: ClientError, socket: Socket): string | undefined {
  const latest = unfinished.get(socket)?.at(-1)?.req;
  // A complete one is an earlier request on the connection.
  if (latest !== undefined && !latest.complete) return latest.url;
  return requestTargetIn(error.rawPacket);
}

/**
 * The target of the request line a chunk begins with (`method SP target SP HTTP-version CRLF`), if
 * it begins with a whole one: the chunk may be missing, a piece of a request line, or the middle
 * of a request, and none of those names a target.
 */
export function requestTargetIn(packet: unknown): string | undefined {
  if (!Buffer.isBuffer(packet)) return undefined;
  return REQUEST_LINE.exec(packet.subarray(0, REQUEST_LINE_LIMIT).toString('latin1'))?.[1];
}

function answerClientError(
  app: FastifyInstance,
  error: ClientError,
  socket: Socket,
  onAnswer: ((status: number) => void) | undefined,
  answerFor: AnswerFor,
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
  if (answeredWhileItsBodyCame(socket) || isClosing(socket)) {
    // The request was refused from its headers (a Transfer-Encoding Node reads to the end of the
    // connection, say), and then its body could not be parsed: it has its answer, and gets no second.
    app.log.info({ code: error.code }, 'body unparsable after its request was answered: closed after the answer');
    closeAfterAnswers(socket);
    return;
  }
  if (answersOnTheirWay(socket)) {
    app.log.info({ code: error.code }, 'unparsable request after others on the connection: closed after their answers');
    closeAfterAnswers(socket);
    return;
  }
  const { status, ...answer } = answerFor(targetOf(error, socket), clientErrorOf(error.code));
  // No request object exists, so no request line: this one ties the answer's X-Request-Id to the log.
  const reqId = randomUUID();
  app.log.info({ reqId, statusCode: status, code: error.code }, 'request not parsed');
  onAnswer?.(status);
  writeClosingAnswer(socket, status, reqId, answer);
}

/** Headers every closing answer has, written after those of the answer itself. */
const WRITTEN_LAST = new Set(['content-type', 'content-length', 'cache-control', 'connection', 'x-request-id']);

/**
 * Writes an error answer on a connection no response object serves (the request could not be
 * parsed, or Node handed over the bare socket), then closes the connection, lingering.
 */
export function writeClosingAnswer(socket: Socket, status: number, reqId: string, { body, headers }: PreparedAnswer) {
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${headers['content-type']}\r\n`;
  // The answer's own, such as a 405's Allow.
  for (const [name, value] of Object.entries(headers)) {
    if (!WRITTEN_LAST.has(name)) head += `${name}: ${value}\r\n`;
  }
  socket.write(
    `${head}Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${reqId}\r\n` +
      'X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n' +
      body,
  );
  closeLingering(socket);
}

const REQUEST_TIMEOUT = new ApiError(408, 'request_timeout', 'The request took too long to arrive');
const HEADERS_TOO_LARGE = new ApiError(431, 'headers_too_large', 'Request headers are too large');
const MALFORMED_REQUEST = new ApiError(400, 'invalid_request', 'Malformed HTTP request');

function clientErrorOf(code: string | undefined): ApiError {
  switch (code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return REQUEST_TIMEOUT;
    case 'HPE_HEADER_OVERFLOW':
      return HEADERS_TOO_LARGE;
    default:
      return MALFORMED_REQUEST;
  }
}
