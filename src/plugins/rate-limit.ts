import type { FastifyInstance, FastifyRequest, onRequestHookHandler } from 'fastify';
import LocalStore, { type Counted, type CountingStore } from '@fastify/rate-limit/store/LocalStore.js';
import RedisStore from '@fastify/rate-limit/store/RedisStore.js';
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

/**
 * Counts a request under `key` in `store` and calls `then` with the count: at once for the
 * in-memory store, when Redis answers for the shared one; undefined when it could not be counted
 * (Redis down): the limit fails open.
 */
type Count = (store: CountingStore, key: string, max: number, then: (counted: Counted | undefined) => void) => void;

const WINDOW_MS = 60_000;

/** Every key in Redis starts with this, apart from other applications' keys on the same server. */
export const REDIS_KEY_PREFIX = 'petstore-ratelimit-';

export interface RateLimits {
  /** onRequest hook for after authentication: counts the request against its API key. */
  perKey: onRequestHookHandler | undefined;
  /** Counts a failed authentication against the client address: the 429 to answer once over. */
  authFailure: FailureLimit | undefined;
}

/**
 * A limit's check: counts the request under `keyOf(request)`, sets the RateLimit headers and
 * answers with the 429 to send when over the limit. The counting and the window are
 * @fastify/rate-limit's stores', called directly: its createRateLimit wraps every count in three
 * promises, ~8,000 instructions a count in process against ~1,600 with the in-memory store's
 * callback, which answers at once (BENCHMARKS.md). The answers are this API's Error body, one per wait in seconds (a limit has at
 * most its window's worth), each built once.
 */
function limitCheck(
  count: Count,
  store: CountingStore,
  max: number,
  keyOf: (request: FastifyRequest) => string,
): FailureLimit {
  const refusals = new Map<number, ApiError>();
  const refusal = (seconds: number) => {
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
  const limit = String(max);
  return (request, reply, answer) => {
    count(store, keyOf(request), max, (counted) => {
      if (counted === undefined) {
        answer(undefined);
        return;
      }
      const seconds = Math.ceil(counted.ttl / 1000);
      if (counted.current > max) {
        answer(refusal(seconds));
        return;
      }
      reply.headers({
        'ratelimit-limit': limit,
        'ratelimit-remaining': String(max - counted.current),
        'ratelimit-reset': String(seconds),
      });
      answer(undefined);
    });
  };
}

const countInProcess: Count = (store, key, max, then) =>
  store.incr(key, (_error, counted) => then(counted), WINDOW_MS, max);

/** Counting in Redis: a request that cannot be counted is let through, and the outage logged once. */
async function sharedCount(app: FastifyInstance, redis: Redis): Promise<Count> {
  const availability = new RedisAvailability(app.log, redisLocation(redis)).watch(redis);
  await connectRedis(redis);
  return (store, key, max, then) =>
    store.incr(
      key,
      (error, counted) => {
        if (error === null && counted !== undefined) {
          availability.answered();
          then(counted);
        } else {
          availability.failed(error ?? new Error('Redis gave no count'));
          then(undefined);
        }
      },
      WINDOW_MS,
      max,
    );
}

/**
 * The two limits, each with a store of its own. With a Redis client, every instance using that
 * Redis counts together; without one, each process counts alone (in memory).
 */
export async function rateLimits(
  app: FastifyInstance,
  settings: RateLimitSettings,
  refuse: Refuse,
  redis?: Redis,
): Promise<RateLimits> {
  // Keys named as @fastify/rate-limit's createRateLimit names them (a child store with no route),
  // so that instances of earlier versions sharing the Redis count together with this one.
  const newStore = (): CountingStore =>
    redis === undefined
      ? new LocalStore(false, false)
      : new RedisStore(false, false, redis, REDIS_KEY_PREFIX).child({
          continueExceeding: false,
          exponentialBackoff: false,
          routeInfo: {},
        });
  const count = redis === undefined ? countInProcess : await sharedCount(app, redis);
  const perKeyCheck =
    settings.perMinute > 0
      ? limitCheck(count, newStore(), settings.perMinute, (request) => `key:${request.principal?.keyId}`)
      : undefined;
  return {
    perKey:
      perKeyCheck &&
      function limitPerKey(request, reply, done) {
        perKeyCheck(request, reply, (exceeded) => {
          if (exceeded !== undefined) refuse(reply, exceeded);
          done();
        });
      },
    authFailure:
      settings.authFailuresPerMinute > 0
        ? limitCheck(count, newStore(), settings.authFailuresPerMinute, (request) => `ip:${request.ip}`)
        : undefined,
  };
}
