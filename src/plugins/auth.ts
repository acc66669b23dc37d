import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRequestHookHandler } from 'fastify';
import { hashKey, hasKeyShape } from '../auth/api-keys.js';
import { ApiError } from '../domain/errors.js';
import type { Refuse } from './errors.js';
import type { FailureLimit, KeyLimit } from './rate-limit/index.js';
import type { AccountRepository, Principal } from '../storage/types.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the bearer hook on operations the contract secures. */
    principal?: Principal;
  }
}

const REALM = 'Bearer realm="petstore"';
// RFC 7235: the scheme name is case-insensitive, then one or more spaces and the token. A token with
// characters outside RFC 6750's token68 is still a Bearer token sent, an invalid one
// (error="invalid_token"): hasKeyShape refuses it, or no key is found for it.
const BEARER = /^bearer +([^ ](?:.*[^ ])?) *$/is;

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

/** How long before a key expires its responses say so (`API-Key-Expires`). */
export const KEY_EXPIRY_WARNING_MS = 7 * 24 * 60 * 60 * 1000;

function expired(expiresAt: number): ApiError {
  return unauthorized(`API key expired at ${new Date(expiresAt).toISOString()}; create or rotate one`, true);
}

/**
 * An onRequest hook after authentication: a key without `scope` is a 403 naming it, before the
 * body is read, so the key learns nothing of a body it may not send. A key created without scopes
 * holds them all.
 */
export function requireScopes(scopes: readonly string[], refuse: Refuse): onRequestHookHandler {
  const refusals = new Map(
    scopes.map((scope) => [scope, new ApiError(403, 'insufficient_scope', `This API key lacks the scope ${scope}`)]),
  );
  return function checkScopes(request, reply, done) {
    const held = request.principal?.scopes;
    if (held !== undefined && held !== null) {
      for (const [scope, refusal] of refusals) {
        if (!held.includes(scope)) {
          refuse(reply, refusal);
          break;
        }
      }
    }
    done();
  };
}

/** The token of `Authorization: Bearer <token>`, or the 401 for a header that is missing or not that. */
function bearerToken(header: string | undefined): string | ApiError {
  const token = header === undefined ? undefined : BEARER.exec(header)?.[1];
  if (token !== undefined) return token;
  if (header === undefined || header === '' || BEARER_ALONE.test(header)) return MISSING_KEY;
  return NOT_BEARER;
}

/** The limits authentication applies: failures per client address, requests per key. */
export interface AuthLimits {
  failures?: FailureLimit | undefined;
  perKey?: KeyLimit | undefined;
}

/**
 * Authenticates as an `onRequest` hook, i.e. before the body is read or anything is validated:
 * a request without a valid key learns nothing of the schema and its body is never parsed.
 * A refusal is answered with `refuse`; a request that sends no well-formed key is refused with
 * no promise on the way but the failure limit's count.
 * Then the request is counted against its key's limit; a key already over it is refused before
 * it is looked up (KeyLimit.blocked).
 */
export function bearerAuth(
  accounts: AccountRepository,
  refuse: Refuse,
  { failures, perKey }: AuthLimits = {},
  now: () => number = Date.now,
): onRequestHookHandler {
  const fail = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, failure: ApiError) => {
    if (failures === undefined) {
      refuse(reply, failure);
      done();
      return;
    }
    failures(request, reply, (limited) => {
      refuse(reply, limited ?? failure);
      done();
    });
  };
  return function authenticate(request, reply, done) {
    const token = bearerToken(request.headers.authorization);
    if (typeof token !== 'string') {
      fail(request, reply, done, token);
      return;
    }
    if (!hasKeyShape(token)) {
      fail(request, reply, done, INVALID_KEY);
      return;
    }
    const hash = hashKey(token);
    const blocked = perKey?.blocked(request, hash);
    if (blocked !== undefined) {
      // Whose key it is, for the metrics' cause and the log, as if it had been looked up.
      request.principal = blocked.principal;
      refuse(reply, blocked.refusal);
      done();
      return;
    }
    accounts.findPrincipal(hash).then((principal) => {
      if (principal === undefined) {
        fail(request, reply, done, INVALID_KEY);
        return;
      }
      const { expiresAt } = principal;
      if (expiresAt !== null) {
        const left = expiresAt - now();
        if (left <= 0) {
          fail(request, reply, done, expired(expiresAt));
          return;
        }
        if (left < KEY_EXPIRY_WARNING_MS) reply.header('api-key-expires', new Date(expiresAt).toUTCString());
      }
      request.principal = principal;
      if (perKey === undefined) {
        done();
        return;
      }
      perKey.count(request, reply, hash, (limited) => {
        if (limited !== undefined) refuse(reply, limited);
        done();
      });
    }, done);
  };
}
