import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { ApiError } from '../../domain/errors.js';
import { connectRedis, RedisAvailability, redisLocation } from './redis.js';
import { LimitLog } from '../request-log.js';
import type { KeyHash, Principal } from '../../storage/types.js';
import type { RateLimitSettings } from '../settings.js';

/** @fastify/rate-limit's check of one limit: counts `request` under its key (`createRateLimit`). */
type LimitCheck = ReturnType<FastifyInstance['createRateLimit']>;

const WINDOW_MS = 60_000;

/**
 * Every counter in Redis is named with this, then `key:<key id>` (per-key limit) or `ip:<client
 * address>` (failed authentications): apart from other applications' keys on the same server
 * (docs/several-instances.md).
 */
export const REDIS_KEY_PREFIX = 'petstore-ratelimit-';

/**
 * Counts a request against a limit, then answers: with the refusal to send when over it (a 429),
 * undefined otherwise, once @fastify/rate-limit has counted it.
 */
export type FailureLimit = (
  request: FastifyRequest,
  reply: FastifyReply,
  answer: (refusal: ApiError | undefined) => void,
) => void;

/**
 * The per-key limit, called by authentication: `blocked` before the key is looked up, `count` once
 * it has authenticated.
 */
export interface KeyLimit {
  /** The key of this hash went over its limit and its window has not ended: the 429, and whose key it is. */
  blocked(request: FastifyRequest, hash: KeyHash): Blocked | undefined;
  /** Counts an authenticated request against its key: the 429 to answer once over, undefined otherwise. */
  count(
    request: FastifyRequest,
    reply: FastifyReply,
    hash: KeyHash,
    answer: (refusal: ApiError | undefined) => void,
  ): void;
}

export interface Blocked {
  principal: Principal;
  refusal: ApiError;
  /** When the key's window ends (ms since the epoch). */
  resetAt: number;
}

export interface RateLimits {
  perKey: KeyLimit | undefined;
  /** Counts a failed authentication against the client address: the 429 to answer once over. */
  authFailure: FailureLimit | undefined;
}

/** A limit's 429, one per wait in seconds (a limit has at most its window's worth), each built once. */
function refusals(max: number): (seconds: number) => ApiError {
  const bySeconds = new Map<number, ApiError>();
  return (seconds) => {
    let error = bySeconds.get(seconds);
    if (error === undefined) {
      error = new ApiError(429, 'rate_limited', `Rate limit exceeded; retry in ${seconds} seconds`, {
        'ratelimit-limit': String(max),
        'ratelimit-remaining': '0',
        'ratelimit-reset': String(seconds),
        'retry-after': String(seconds),
      });
      bySeconds.set(seconds, error);
    }
    return error;
  };
}

/** Answers a count: the refusal when over the limit, with when the window ends (ms since the epoch). */
type LimitAnswer = (refusal: ApiError | undefined, resetAt?: number) => void;

/**
 * A limit's check: counts the request with @fastify/rate-limit, sets the RateLimit headers and
 * answers with the 429 to send when over the limit, in the contract's Error body. A request that
 * cannot be counted (Redis down) is let through: the limit fails open, and `availability` logs the
 * outage once.
 */
function limitCheck(
  check: LimitCheck,
  max: number,
  availability: RedisAvailability | undefined,
  refusal = refusals(max),
): (request: FastifyRequest, reply: FastifyReply, answer: LimitAnswer) => void {
  const limit = String(max);
  return (request, reply, answer) => {
    check(request).then(
      (counted) => {
        availability?.answered();
        // No allow list is configured, so every request is counted.
        if (counted.isAllowed) {
          answer(undefined);
          return;
        }
        if (counted.isExceeded) {
          answer(refusal(counted.ttlInSeconds), Date.now() + counted.ttl);
          return;
        }
        reply.headers({
          'ratelimit-limit': limit,
          'ratelimit-remaining': String(counted.remaining),
          'ratelimit-reset': String(counted.ttlInSeconds),
        });
        answer(undefined);
      },
      (error: unknown) => {
        availability?.failed(error instanceof Error ? error : new Error(String(error)));
        answer(undefined);
      },
    );
  };
}

/**
 * Keys over their limit, by hash, until their window ends: a request presenting one is refused
 * before the key is looked up or counted again, which is most of what a 429 cost (BENCHMARKS.md).
 * A key enters only once it has authenticated and gone over its limit, so guessed keys cannot fill
 * this: it holds at most one entry per key. A key revoked while here is refused with 429 until its
 * window ends, then with 401. With Redis, the end is the shared count's expiry, the same on every
 * instance.
 */
class BlockedKeys {
  readonly #byHash = new Map<string, Blocked>();

  constructor(private readonly refusal: (seconds: number) => ApiError) {}

  block(hash: KeyHash, principal: Principal, resetAt: number): void {
    const now = Date.now();
    for (const [key, entry] of this.#byHash) if (entry.resetAt <= now) this.#byHash.delete(key);
    this.#byHash.set(hash, {
      principal,
      resetAt,
      refusal: this.refusal(Math.ceil((resetAt - now) / 1000)),
    });
  }

  find(hash: KeyHash): Blocked | undefined {
    // Nearly always empty: then a request pays this one comparison.
    if (this.#byHash.size === 0) return undefined;
    const entry = this.#byHash.get(hash);
    if (entry === undefined) return undefined;
    const left = entry.resetAt - Date.now();
    if (left <= 0) {
      this.#byHash.delete(hash);
      return undefined;
    }
    // The entry itself, its refusal brought up to date: a blocked request allocates nothing.
    entry.refusal = this.refusal(Math.ceil(left / 1000));
    return entry;
  }
}

/**
 * One limit counted by @fastify/rate-limit: registered in a scope of its own (so each limit has its
 * store, its maximum and its key), adding no hook to any route; the key is `keyOf(request)`, in
 * Redis behind REDIS_KEY_PREFIX.
 */
async function counter(
  app: FastifyInstance,
  max: number,
  keyOf: (request: FastifyRequest) => string,
  redis: Redis | undefined,
): Promise<LimitCheck> {
  let check: LimitCheck | undefined;
  await app.register(async (scope) => {
    await scope.register(fastifyRateLimit, {
      global: false,
      max,
      timeWindow: WINDOW_MS,
      keyGenerator: keyOf,
      // Errors reach limitCheck, which fails open and logs the outage.
      skipOnError: false,
      ...(redis !== undefined && { redis, nameSpace: REDIS_KEY_PREFIX }),
    });
    check = scope.createRateLimit();
  });
  if (check === undefined) throw new Error('@fastify/rate-limit gave no check');
  return check;
}

/**
 * The two limits, each counted by @fastify/rate-limit in a store of its own. With a Redis client,
 * every instance using that Redis counts together; without one, each process counts alone (in
 * memory, the 5,000 most recent keys).
 */
export async function rateLimits(
  app: FastifyInstance,
  settings: RateLimitSettings,
  redis?: Redis,
): Promise<RateLimits> {
  let availability: RedisAvailability | undefined;
  if (redis !== undefined) {
    availability = new RedisAvailability(app.log, redisLocation(redis)).watch(redis);
    await connectRedis(redis);
  }
  const { perMinute, authFailuresPerMinute } = settings;
  const perKey =
    perMinute > 0
      ? keyLimit(
          await counter(app, perMinute, (request) => `key:${request.principal?.keyId}`, redis),
          perMinute,
          availability,
          new LimitLog(app.log, 'per key'),
        )
      : undefined;
  const authFailure =
    authFailuresPerMinute > 0
      ? failureLimit(
          await counter(app, authFailuresPerMinute, (request) => `ip:${request.ip}`, redis),
          authFailuresPerMinute,
          availability,
          new LimitLog(app.log, 'failed authentications'),
        )
      : undefined;
  return { perKey, authFailure };
}

function keyLimit(
  counted: LimitCheck,
  max: number,
  availability: RedisAvailability | undefined,
  log: LimitLog,
): KeyLimit {
  const refusal = refusals(max);
  const check = limitCheck(counted, max, availability, refusal);
  const blocked = new BlockedKeys(refusal);
  const logRefusal = (request: FastifyRequest, { keyId }: Principal, resetAt: number) =>
    log.refused(request, String(keyId), { keyId }, resetAt);
  return {
    blocked(request, hash) {
      const found = blocked.find(hash);
      if (found !== undefined) logRefusal(request, found.principal, found.resetAt);
      return found;
    },
    count(request, reply, hash, answer) {
      check(request, reply, (refusal, resetAt) => {
        const { principal } = request;
        if (resetAt !== undefined && principal !== undefined) {
          blocked.block(hash, principal, resetAt);
          logRefusal(request, principal, resetAt);
        }
        answer(refusal);
      });
    },
  };
}

function failureLimit(
  counted: LimitCheck,
  max: number,
  availability: RedisAvailability | undefined,
  log: LimitLog,
): FailureLimit {
  const check = limitCheck(counted, max, availability);
  return (request, reply, answer) =>
    check(request, reply, (refusal, resetAt) => {
      if (resetAt !== undefined) log.refused(request, request.ip, { client: request.ip }, resetAt);
      answer(refusal);
    });
}
