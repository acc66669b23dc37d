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
 * The transfer codings a request names besides `chunked` (RFC 9112 6.1), by name: Node's parser
 * frames `Transfer-Encoding: gzip, chunked` as plain chunked and would hand over the body still
 * gzipped. Empty list elements are ignored (RFC 9110 5.6.1). Node itself refuses, with a 400, a
 * list whose last coding is not chunked (RFC 9112 6.3), so only codings before it reach here.
 */
function unimplementedCodings(transferEncoding: string): string[] {
  return transferEncoding
    .split(',')
    .map((coding) => (coding.split(';', 1)[0] ?? '').trim().toLowerCase())
    .filter((name) => name !== '' && name !== 'chunked');
}

/**
 * A 501 for a body in a transfer coding this server does not implement (RFC 9112 6.1), before
 * the body is read: its length is unknown, so the connection is closed after the answer.
 */
export const refuseUnimplementedTransferCoding: onRequestHookHandler = (request, _reply, done) => {
  const transferEncoding = request.headers['transfer-encoding'];
  const codings = transferEncoding === undefined ? [] : unimplementedCodings(transferEncoding);
  if (codings.length === 0) {
    done();
    return;
  }
  const named = shown(codings.join(', '));
  done(
    new ApiError(
      501,
      'not_implemented',
      `Transfer-Encoding ${named} is not implemented: send the body with Content-Length, or chunked alone`,
    ),
  );
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
