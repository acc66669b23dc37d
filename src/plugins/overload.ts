import underPressure from '@fastify/under-pressure';
import type { FastifyInstance } from 'fastify';
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

/**
 * A lower threshold or a shorter sample sheds earlier, but sheds a freshly started process too
 * (module loading and compiling hold its loop) on a busy machine: 50 ms sampled every 100 ms
 * answered 503 to the first requests of `npm run dev` and contract:check there (docs/operating.md).
 */
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
    /** Answered while shedding (/healthz; /readyz, which reports it). */
    answerWhileShedding?: boolean;
  }
}

/** For routes that must answer under pressure (/healthz; /readyz, which reports it). */
export const answerUnderPressure = { answerWhileShedding: true };

/** The 503 of a shed request, and of /readyz while shedding. */
export function overloadedError(settings: OverloadSettings): ApiError {
  return new ApiError(503, 'service_unavailable', 'The server is overloaded; retry shortly', {
    'retry-after': String(settings.retryAfterSeconds),
  });
}

/**
 * Answers 503 `service_unavailable` with Retry-After, at once and before anything else is done,
 * while the event loop is saturated, instead of queueing requests until every client times out.
 * @fastify/under-pressure samples the event loop delay and says whether it is past the threshold
 * (`isUnderPressure`, which /readyz reads too); the hook here answers. under-pressure's own hook
 * reads `request.routeOptions` (an object built on each read) on every request, shed or served: it
 * is registered in a context of its own, which no route is in, so that hook never runs.
 */
async function overloadPlugin(app: FastifyInstance, { settings, metrics, refuse }: OverloadOptions): Promise<void> {
  if (settings.maxEventLoopDelayMs === 0) {
    // Off: not even the sampling (a histogram fed every 10 ms, and a timer) runs.
    app.decorate('isUnderPressure', () => false);
    return;
  }
  let sampler: FastifyInstance | undefined;
  await app.register(async (context) => {
    await context.register(underPressure, {
      maxEventLoopDelay: settings.maxEventLoopDelayMs,
      sampleInterval: settings.sampleIntervalMs,
    });
    sampler = context;
  });
  const isUnderPressure = () => sampler?.isUnderPressure() === true;
  app.decorate('isUnderPressure', isUnderPressure);

  const answered = new Set<string>();
  app.addHook('onRoute', (route) => {
    if (route.config?.answerWhileShedding === true) answered.add(route.url);
  });
  const overloaded = overloadedError(settings);
  app.addHook('onRequest', function shed(request, reply, done) {
    // While not shedding, this is all a request pays.
    if (isUnderPressure()) {
      const { url } = request;
      const query = url.indexOf('?');
      if (!answered.has(query === -1 ? url : url.slice(0, query))) {
        metrics?.rejected('overload');
        refuse(reply, overloaded);
      }
    }
    done();
  });
}

export default fp(overloadPlugin, { name: 'overload' });
