// The settings the configuration reads and the app is composed with, and their defaults: below both,
// so that config/environment.ts needs nothing of the app.

export interface ConnectionLimits {
  /** A request (headers and body) must arrive within this; slower clients get 408. */
  requestTimeoutMs: number;
  /** Connections beyond this are refused, so slow clients cannot exhaust the server. */
  maxConnections: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = { requestTimeoutMs: 10_000, maxConnections: 1024 };

export interface RateLimitSettings {
  /** Requests a minute per API key; 0 turns the limit off. */
  perMinute: number;
  /** Failed authentications a minute per client address; 0 turns the limit off. */
  authFailuresPerMinute: number;
}

export const DEFAULT_RATE_LIMITS: RateLimitSettings = { perMinute: 1000, authFailuresPerMinute: 30 };

export interface OverloadSettings {
  /**
   * Shed a request that has waited longer than this (ms) for the event loop: it finds the loop busy
   * past it (LoopWatch), or, during an episode, follows a turn as long (TurnWatch). 0: never shed.
   */
  maxEventLoopDelayMs: number;
  /** The Retry-After of a shed request's 503, in seconds. */
  retryAfterSeconds: number;
  /** How often the loop watch's timer is due (ms): a busy stretch shorter than this goes unseen. */
  sampleIntervalMs: number;
  /**
   * How much of the process's CPU time (ms) the loop may spend behind past `maxEventLoopDelayMs`
   * before shedding begins: a burst cleared within it is served whole, a queue that stands longer
   * is shed (CoDel's interval, counted in the process's own work). 0: shed as soon as it is behind.
   */
  burstCpuMs: number;
}

/**
 * A request read 25 ms into a saturated turn is shed: a shorter delay served an overload no faster
 * but also shed some of the load of a server merely at capacity (BENCHMARKS.md, "Load held"). The
 * burst allowance is chosen to serve a burst of 500 concurrent creates or reads whole; twice the
 * capacity then queues that long before shedding begins.
 */
export const DEFAULT_OVERLOAD: OverloadSettings = {
  maxEventLoopDelayMs: 25,
  retryAfterSeconds: 1,
  sampleIntervalMs: 10,
  burstCpuMs: 500,
};
