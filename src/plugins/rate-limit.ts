import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { ApiError } from '../errors.js';

export interface RateLimitSettings {
  /** Requests a minute per API key; 0 turns the limit off. */
  perMinute: number;
  /** Failed authentications a minute per client address; 0 turns the limit off. */
  authFailuresPerMinute: number;
}

export const DEFAULT_RATE_LIMITS: RateLimitSettings = { perMinute: 1000, authFailuresPerMinute: 30 };

type Limiter = ReturnType<FastifyInstance['createRateLimit']>;

export interface RateLimits {
  /** onRequest hook for after authentication: counts the request against its API key. */
  perKey: onRequestAsyncHookHandler | undefined;
  /** Counts a failed authentication against the client address: the 429 to answer once over. */
  authFailure: (request: FastifyRequest, reply: FastifyReply) => Promise<ApiError | undefined>;
}

/**
 * Counts the request and sets the RateLimit headers; returns the 429 to answer when over the limit.
 * The counting and the window come from @fastify/rate-limit; the answers are this API's Error body.
 */
async function check(limiter: Limiter, request: FastifyRequest, reply: FastifyReply): Promise<ApiError | undefined> {
  const result = await limiter(request);
  if (result.isAllowed) return undefined;
  const headers = {
    'ratelimit-limit': String(result.max),
    'ratelimit-remaining': String(result.remaining),
    'ratelimit-reset': String(result.ttlInSeconds),
  };
  if (!result.isExceeded) {
    reply.headers(headers);
    return undefined;
  }
  return new ApiError(429, 'rate_limited', `Rate limit exceeded; retry in ${result.ttlInSeconds} seconds`, {
    ...headers,
    'retry-after': String(result.ttlInSeconds),
  });
}

/** Registers @fastify/rate-limit (in memory, per process) and builds the two limits. */
export async function rateLimits(app: FastifyInstance, settings: RateLimitSettings): Promise<RateLimits> {
  await app.register(rateLimit, { global: false });
  const window = 60_000;
  const perKey =
    settings.perMinute > 0
      ? app.createRateLimit({
          max: settings.perMinute,
          timeWindow: window,
          keyGenerator: (request) => `key:${request.principal?.keyId}`,
        })
      : undefined;
  const perAddress =
    settings.authFailuresPerMinute > 0
      ? app.createRateLimit({
          max: settings.authFailuresPerMinute,
          timeWindow: window,
          keyGenerator: (request) => `ip:${request.ip}`,
        })
      : undefined;

  return {
    perKey:
      perKey === undefined
        ? undefined
        : async function limitPerKey(request, reply) {
            const exceeded = await check(perKey, request, reply);
            if (exceeded !== undefined) throw exceeded;
          },
    authFailure: async (request, reply) => (perAddress === undefined ? undefined : check(perAddress, request, reply)),
  };
}
