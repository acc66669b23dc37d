import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { hashKey, isWellFormedKey } from '../auth/api-keys.js';
import { ApiError } from '../errors.js';
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

/**
 * Authenticates as an `onRequest` hook, i.e. before the body is read or anything is validated:
 * a request without a valid key learns nothing of the schema and its body is never parsed.
 */
export function bearerAuth(
  accounts: AccountRepository,
  /** Told of each failure; may answer with another error (a 429 for too many failures). */
  onFailure: (request: FastifyRequest, reply: FastifyReply) => Promise<ApiError | undefined>,
): onRequestAsyncHookHandler {
  async function identify(request: FastifyRequest): Promise<Principal | ApiError> {
    const header = request.headers.authorization;
    if (header === undefined || header === '') {
      return unauthorized('Missing API key: send Authorization: Bearer <key>', false);
    }
    const token = BEARER.exec(header)?.[1];
    if (token === undefined) return unauthorized('Authorization must use the Bearer scheme: Bearer <key>', false);
    const principal = isWellFormedKey(token) ? await accounts.findPrincipal(hashKey(token)) : undefined;
    return principal ?? unauthorized('Invalid or revoked API key', true);
  }

  return async function authenticate(request: FastifyRequest, reply: FastifyReply) {
    const identity = await identify(request);
    if (identity instanceof ApiError) throw (await onFailure(request, reply)) ?? identity;
    request.principal = identity;
  };
}
