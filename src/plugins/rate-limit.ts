import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import type { Redis } from 'ioredis';
import { ApiError } from '../errors.js';
import type { FailureLimit } from './auth.js';
import type { Refuse } from './errors.js';
import { connectRedis, RedisAvailability, redisLocation } from '../redis.js';

export interface RateLimitSettings {
  /** Requests a minute per API key; 0 turns the limit off. */
  perMinute: number;
  /** Failed authentications a minute per client address; 0 turns the limit off. */
  authFailuresPerMinute: number;
}

export const DEFAULT_RATE_LIMITS: RateLimitSettings = { perMinute: 1000, authFailuresPerMinute: 30 };

type Limiter = ReturnType<FastifyInstance['createRateLimit']>;
type LimitResult = Awaited<ReturnType<Limiter>>;
/** Counts a request; undefined when it could not be counted (Redis down): the limit fails open. */
type Count = (limiter: Limiter, request: FastifyRequest) => Promise<LimitResult | undefined>;

/** Every key in Redis starts with this, apart from other applications' keys on the same server. */
export const REDIS_KEY_PREFIX = 'petstore-ratelimit-';

export interface RateLimits {
  /** onRequest hook for after authentication: counts the request against its API key. */
  perKey: onRequestAsyncHookHandler | undefined;
  /** Counts a failed authentication against the client address: the 429 to answer once over. */
  authFailure: FailureLimit | undefined;
}

/**
 * A limit's check: counts the request and sets the RateLimit headers; returns the 429 to answer
 * when over the limit. The counting and the window come from @fastify/rate-limit; the answers are
 * this API's Error body, one per wait in seconds (a limit has at most its window's worth), each
 * built once.
 */
function limitCheck(count: Count, limiter: Limiter): FailureLimit {
  const refusals = new Map<number, ApiError>();
  const refusal = (max: number, seconds: number) => {
    let error = refusals.get(seconds);
    if (error === undefined) {
      error = new ApiError(429, 'rate_limited', `Rate limit exceeded; retry in ${seconds} seconds`, {
        'ratelimit-limit': String(max),
        'ratelimit-remaining': '0',
        'ratelimit-reset': String(seconds),
        'retry-after': String(seconds),
      });
      refusals.set(seconds, error);
    }
    return error;
  };
  return async (request, reply) => {
    const result = await count(limiter, request);
    if (result === undefined || result.isAllowed) return undefined;
    if (result.isExceeded) return refusal(result.max, result.ttlInSeconds);
    reply.headers({
      'ratelimit-limit': String(result.max),
      'ratelimit-remaining': String(result.remaining),
      'ratelimit-reset': String(result.ttlInSeconds),
    });
    return undefined;
  };
}

/** Counting in Redis: a request that cannot be counted is let through, and the outage logged once. */
async function sharedCount(app: FastifyInstance, redis: Redis): Promise<Count> {
  const availability = new RedisAvailability(app.log, redisLocation(redis)).watch(redis);
  await connectRedis(redis);
  return async (limiter, request) => {
    try {
      const result = await limiter(request);
      availability.answered();
      return result;
    } catch (error) {
      availability.failed(error as Error);
      return undefined;
    }
  };
}

/**
 * Registers @fastify/rate-limit and builds the two limits. With a Redis client, every instance
 * using that Redis counts together; without one, each process counts alone (in memory).
 */
export async function rateLimits(
  app: FastifyInstance,
  settings: RateLimitSettings,
  refuse: Refuse,
  redis?: Redis,
): Promise<RateLimits> {
  // Errors are not skipped by the plugin (skipOnError): it would then report a full budget in the
  // RateLimit headers, and the outage would go unnoticed. sharedCount lets the request through.
  await app.register(rateLimit, {
    global: false,
    ...(redis === undefined ? {} : { redis, nameSpace: REDIS_KEY_PREFIX }),
  });
  const count: Count = redis === undefined ? (limiter, request) => limiter(request) : await sharedCount(app, redis);
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

  const perKeyCheck = perKey && limitCheck(count, perKey);
  return {
    perKey:
      perKeyCheck &&
      async function limitPerKey(request, reply) {
        const exceeded = await perKeyCheck(request, reply);
        if (exceeded !== undefined) refuse(reply, exceeded);
      },
    authFailure: perAddress && limitCheck(count, perAddress),
  };
}
