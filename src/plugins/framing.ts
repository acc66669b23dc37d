import type { FastifyInstance, FastifyRequest, onRequestHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError, shown } from '../domain/errors.js';

/**
 * Headers a request may carry once. Node keeps the first of a repeated one and drops the rest,
 * so a request like `Host: a` + `Host: b` would mean different things to a proxy and to us.
 */
const SINGLE_VALUE_HEADERS = ['host', 'authorization', 'content-type', 'content-length', 'idempotency-key'];

/** The names above by length, each with its bit: most headers are passed over without lower-casing. */
const SINGLE_VALUE_BY_LENGTH = new Map<number, { name: string; bit: number }[]>();
SINGLE_VALUE_HEADERS.forEach((name, index) => {
  const sameLength = SINGLE_VALUE_BY_LENGTH.get(name.length) ?? [];
  SINGLE_VALUE_BY_LENGTH.set(name.length, [...sameLength, { name, bit: 1 << index }]);
});

/** The first single-value header the request repeats. Runs on every request, so it allocates little. */
function repeatedHeader(rawHeaders: readonly string[]): string | undefined {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const raw = rawHeaders[i] ?? '';
    const candidates = SINGLE_VALUE_BY_LENGTH.get(raw.length);
    if (candidates === undefined) continue;
    const name = raw.toLowerCase();
    for (const candidate of candidates) {
      if (candidate.name !== name) continue;
      if ((seen & candidate.bit) !== 0) return name;
      seen |= candidate.bit;
    }
  }
  return undefined;
}

/** Why the request's framing is ambiguous (RFC 9112 3.2: no Host, or more than one), if it is. */
function framingProblem(request: FastifyRequest): ApiError | undefined {
  if (request.headers.host === undefined && request.raw.httpVersion !== '1.0') {
    return new ApiError(400, 'invalid_request', 'The Host header is required');
  }
  // Node folds a repeated header into one entry of `headers`: with one entry per raw name-value
  // pair, no name came twice, and the scan below can be skipped.
  const { headers, rawHeaders } = request.raw;
  if (Object.keys(headers).length * 2 === rawHeaders.length) return undefined;
  const repeated = repeatedHeader(rawHeaders);
  return repeated === undefined
    ? undefined
    : new ApiError(400, 'invalid_request', `The ${repeated} header may be sent only once`);
}

/**
 * Why a request's Transfer-Encoding cannot be served, if it cannot. Node's parser frames
 * `gzip, chunked` as plain chunked and would hand over the body still gzipped; a coding the server
 * does not implement is a 501 (RFC 9112 6.1). A list whose last coding is not chunked leaves the
 * length unknown, and so does chunked twice: a 400 (RFC 9112 6.3; Node answers it itself unless
 * the request also asks to close the connection). Empty list elements are ignored (RFC 9110 5.6.1).
 */
function transferCodingProblem(transferEncoding: string): ApiError | undefined {
  const codings = transferEncoding
    .split(',')
    // Whole, parameters too: `chunked;x` is not the chunked Node's parser frames by.
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '');
  const others = codings.filter((coding) => coding !== 'chunked');
  if (codings.at(-1) !== 'chunked' || codings.length - others.length > 1) {
    return new ApiError(400, 'invalid_request', 'Transfer-Encoding must end with chunked, named once (RFC 9112 6.3)');
  }
  if (others.length === 0) return undefined;
  return new ApiError(
    501,
    'not_implemented',
    `Transfer-Encoding ${shown(others.join(', '))} is not implemented: send the body with Content-Length, or chunked alone`,
  );
}

/** Refuses, before the body is read, a Transfer-Encoding this server cannot serve (a 501 or a 400). */
export const refuseUnimplementedTransferCoding: onRequestHookHandler = (request, _reply, done) => {
  const transferEncoding = request.headers['transfer-encoding'];
  done(transferEncoding === undefined ? undefined : transferCodingProblem(transferEncoding));
};

/** Synchronous: a hook that returns a promise costs one, and a microtask, on every request. */
const rejectAmbiguousFraming: onRequestHookHandler = (request, _reply, done) => done(framingProblem(request));

/**
 * Rejects requests whose HTTP framing is ambiguous, with the Error body. Node's own check for Host
 * answers with an empty body, so it is turned off (`requireHostHeader: false`) in favour of this one.
 */
async function framingPlugin(app: FastifyInstance): Promise<void> {
  app.addHook('onRequest', rejectAmbiguousFraming);
}

export default fp(framingPlugin, { name: 'framing' });
