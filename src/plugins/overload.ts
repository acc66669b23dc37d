import underPressure from '@fastify/under-pressure';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError } from '../errors.js';
import type { Metrics } from '../metrics/registry.js';
import type { Refuse } from './errors.js';

export interface OverloadSettings {
  /** Shed when the event loop's mean delay over a sample exceeds this (ms); 0 turns shedding off. */
  maxEventLoopDelayMs: number;
  /** The Retry-After of a shed request's 503, in seconds. */
  retryAfterSeconds: number;
  /** How often the event loop delay is sampled (ms): how soon shedding starts and stops. */
  sampleIntervalMs: number;
}

export const DEFAULT_OVERLOAD: OverloadSettings = {
  maxEventLoopDelayMs: 100,
  retryAfterSeconds: 1,
  sampleIntervalMs: 500,
};

export interface OverloadOptions {
  settings: OverloadSettings;
  metrics?: Metrics | undefined;
  refuse: Refuse;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** under-pressure's per-route handler: the health routes answer under pressure too. */
    pressureHandler?: (request: FastifyRequest, reply: FastifyReply) => unknown;
  }
}

/** For routes that must answer under pressure (/healthz; /readyz, which reports it). */
export const answerUnderPressure = { pressureHandler: () => undefined };

/**
 * Answers 503 `service_unavailable` with Retry-After, at once and before anything else is done,
 * while the event loop is saturated, instead of queueing requests until every client times out.
 * @fastify/under-pressure samples the event loop delay and runs this as the first onRequest hook;
 * `app.isUnderPressure()` tells /readyz. The refusal is built once: shedding must cost little.
 */
/** The 503 of a shed request, and of /readyz while shedding. */
export function overloadedError(settings: OverloadSettings): ApiError {
  return new ApiError(503, 'service_unavailable', 'The server is overloaded; retry shortly', {
    'retry-after': String(settings.retryAfterSeconds),
  });
}

async function overloadPlugin(app: FastifyInstance, { settings, metrics, refuse }: OverloadOptions): Promise<void> {
  if (settings.maxEventLoopDelayMs === 0) {
    // Off: not even the sampling (a histogram fed every 10 ms, and a timer) runs.
    app.decorate('isUnderPressure', () => false);
    return;
  }
  const overloaded = overloadedError(settings);
  await app.register(underPressure, {
    maxEventLoopDelay: settings.maxEventLoopDelayMs,
    sampleInterval: settings.sampleIntervalMs,
    // Answered here, as under-pressure documents, not thrown: no error handler on the way.
    pressureHandler: (_request: FastifyRequest, reply: FastifyReply) => {
      metrics?.rejected('overload');
      refuse(reply, overloaded);
    },
  });
}

export default fp(overloadPlugin, { name: 'overload' });
