// @fastify/rate-limit's own stores, CommonJS and left out of its typings: plugins/rate-limit.ts
// counts with them directly.

declare module '@fastify/rate-limit/store/LocalStore.js' {
  /** A count under one key: the requests in the window so far, and the window's milliseconds left. */
  export interface Counted {
    current: number;
    ttl: number;
  }

  /** The README's custom-store interface, with the arguments @fastify/rate-limit's stores take. */
  export interface CountingStore {
    incr(key: string, callback: (error: Error | null, result?: Counted) => void, timeWindow: number, max: number): void;
    child(options: { continueExceeding: boolean; exponentialBackoff: boolean; routeInfo: object }): CountingStore;
  }

  /** Counts in this process (a least-recently-used map of `cache` keys, 5,000 by default). */
  const LocalStore: new (continueExceeding: boolean, exponentialBackoff: boolean, cache?: number) => CountingStore;
  export default LocalStore;
}

declare module '@fastify/rate-limit/store/RedisStore.js' {
  import type { Redis } from 'ioredis';
  import type { CountingStore } from '@fastify/rate-limit/store/LocalStore.js';

  /** Counts in Redis, each key prefixed with `keyPrefix`, by one Lua script per count. */
  const RedisStore: new (
    continueExceeding: boolean,
    exponentialBackoff: boolean,
    redis: Redis,
    keyPrefix: string,
  ) => CountingStore;
  export default RedisStore;
}
