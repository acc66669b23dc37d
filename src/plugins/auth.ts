import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRequestHookHandler } from 'fastify';
import { hashKey, hasKeyShape } from '../auth/api-keys.js';
import { ApiError } from '../errors.js';
import type { Refuse } from './errors.js';
import type { AccountRepository, Principal } from '../storage/types.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the bearer hook on operations the contract secures. */
    principal?: Principal;
  }
}

const REALM = 'Bearer realm="petstore"';
// RFC 7235: the scheme name is case-insensitive; RFC 6750 token68 characters.
const BEARER = /^bearer +([A-Za-z0-9._~+/-]+=*) *$/i;

function unauthorized(message: string, tokenSent: boolean): ApiError {
  const challenge = tokenSent ? `${REALM}, error="invalid_token"` : REALM;
  return new ApiError(401, 'unauthorized', message, { 'www-authenticate': challenge });
}

// Node trims header values, so `Bearer ` with no token arrives as `Bearer`.
const BEARER_ALONE = /^bearer *$/i;

// The three answers never change: built once, a refusal allocates nothing for them.
const MISSING_KEY = unauthorized('Missing API key: send Authorization: Bearer <key>', false);
const NOT_BEARER = unauthorized('Authorization must use the Bearer scheme: Bearer <key>', false);
const INVALID_KEY = unauthorized('Invalid or revoked API key', true);

/** The token of `Authorization: Bearer <token>`, or the 401 for a header that is missing or not that. */
function bearerToken(header: string | undefined): string | ApiError {
  const token = header === undefined ? undefined : BEARER.exec(header)?.[1];
  if (token !== undefined) return token;
  if (header === undefined || header === '' || BEARER_ALONE.test(header)) return MISSING_KEY;
  return NOT_BEARER;
}

/**
 * Counts a request against a limit, then answers: with the refusal to send when over it (a 429),
 * undefined otherwise. At once when counted in this process.
 */
export type FailureLimit = (
  request: FastifyRequest,
  reply: FastifyReply,
  answer: (refusal: ApiError | undefined) => void,
) => void;

/**
 * Authenticates as an `onRequest` hook, i.e. before the body is read or anything is validated:
 * a request without a valid key learns nothing of the schema and its body is never parsed.
 * A refusal is answered with `refuse`; a request that sends no well-formed key is refused with
 * no promise on the way (its failure counted at once in this process, or when Redis answers).
 */
export function bearerAuth(
  accounts: AccountRepository,
  refuse: Refuse,
  limitFailures?: FailureLimit,
): onRequestHookHandler {
  const fail = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, failure: ApiError) => {
    if (limitFailures === undefined) {
      refuse(reply, failure);
      done();
      return;
    }
    limitFailures(request, reply, (limited) => {
      refuse(reply, limited ?? failure);
      done();
    });
  };
  return function authenticate(request, reply, done) {
    const token = bearerToken(request.headers.authorization);
    if (typeof token !== 'string') {
      fail(request, reply, done, token);
    } else if (!hasKeyShape(token)) {
      fail(request, reply, done, INVALID_KEY);
    } else {
      accounts.findPrincipal(hashKey(token)).then((principal) => {
        if (principal === undefined) {
          fail(request, reply, done, INVALID_KEY);
          return;
        }
        request.principal = principal;
        done();
      }, done);
    }
  };
}
