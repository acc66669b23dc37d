import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError } from '../errors.js';
import { methodLabel } from '../metrics/http.js';
import type { Metrics } from '../metrics/registry.js';
import type { CounterSeries } from '../metrics/series.js';
import { closeLingeringAfterAnswer, moreBodyThan } from '../http/lingering-close.js';
import type { OverloadSettings } from '../settings.js';

// Where scripts/contract-check/served.ts imports it from.
export { DEFAULT_OVERLOAD } from '../settings.js';

/** An overload episode ends after this long without a shed request: /readyz is 200 again and the end is logged. */
const EPISODE_QUIET_MS = 1_000;

/** The operation label of shed requests: they are answered before any route is matched. */
export const SHED = 'shed';

export interface OverloadOptions {
  settings: OverloadSettings;
  metrics?: Metrics | undefined;
  /** The request id of a shed request's answer, as fastify's genReqId gives it to others. */
  requestId: (request: IncomingMessage) => string;
  /** Past this, a shed request's body is not read: its connection is closed after the 503. */
  bodyLimit: number;
  /** Headers a shed request's 503 carries besides its own, as [name, value, ...]: a deprecated operation's. */
  headersFor?: (request: IncomingMessage) => readonly string[];
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Answered while shedding (/healthz; /readyz, which reports it). */
    answerWhileShedding?: boolean;
  }
  interface FastifyInstance {
    /** Whether an overload episode is on: a request was shed within the last second. */
    isUnderPressure(): boolean;
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
 * Whether the event loop is saturated, asked for each request: a timer due every `intervalMs`
 * records when it last ran, so `now - lastRun - intervalMs` is how long the loop has been busy
 * past that due time without coming round. A request read now has waited at least about that
 * long. Unlike a sampled mean (@fastify/under-pressure's, every 500 ms; toobusy-js smooths too)
 * this answers within the very loop turn that runs long: at twice the capacity over 1,000
 * connections one turn reads hundreds of requests, and the mean moved too late and too little to
 * shed before they had all waited. The turn before must have run long too (the timer found itself
 * late past the limit): one stall (a garbage collection, the CPU taken by another process, a fresh
 * process compiling) sheds nothing, a saturated loop's turns are all long. It costs a request one
 * clock read; an idle process wakes every `intervalMs` (as monitorEventLoopDelay would).
 */
class LoopWatch {
  #lastRun = performance.now();
  /** How late the timer was when it last ran (ms). */
  #lastLateness = 0;
  readonly #timer: NodeJS.Timeout;

  constructor(
    readonly intervalMs: number,
    readonly limitMs: number,
    onTick: (now: number) => void,
  ) {
    this.#timer = setInterval(() => {
      const now = performance.now();
      this.#lastLateness = now - this.#lastRun - intervalMs;
      this.#lastRun = now;
      onTick(now);
    }, intervalMs).unref();
  }

  /** Whether the loop is late past the limit now, as it was when the timer last ran. */
  saturated(now: number): boolean {
    return now - this.#lastRun - this.intervalMs > this.limitMs && this.#lastLateness > this.limitMs;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/**
 * Turns of the event loop closer together than this follow one another without a pause. Not less:
 * a process that shares its CPU is set aside for a few milliseconds now and then, most of all
 * under the load that makes an episode, and the request then read after a long turn has waited
 * through it all the same (1 ms let test/overload.test.ts serve it, on a loaded machine).
 */
const BACK_TO_BACK_MS = 5;

/**
 * During an overload episode: how long a request read now may have waited. A turn of the event
 * loop reads what arrived during the turn before; when turns follow one another without a pause,
 * that is since the turn before began, otherwise since this one began. A turn is from the first
 * request it reads to the setImmediate that request queued (the check phase after the reads).
 * After a long turn, the next one sheds what it reads: it is short, and the one after serves again.
 */
class TurnWatch {
  #started = 0;
  #previousStarted = 0;
  #previousEnded = -Infinity;
  #open = false;
  readonly #close = () => {
    this.#open = false;
    this.#previousEnded = performance.now();
  };

  waited(now: number): number {
    if (!this.#open) {
      this.#open = true;
      this.#previousStarted = now - this.#previousEnded < BACK_TO_BACK_MS ? this.#started : now;
      this.#started = now;
      setImmediate(this.#close);
    }
    return now - this.#previousStarted;
  }
}

/**
 * Answers 503 `service_unavailable` with Retry-After to a request that has waited for the event loop
 * past `maxEventLoopDelayMs`, instead of queueing it until every client times out. The decision
 * comes before fastify does anything (the server's request listener is wrapped): at twice the
 * capacity a shed must cost far less than a served request, or shedding cannot free the server.
 * The answer's status line, headers and body are prepared once; it is counted with two additions,
 * and logged once per overload episode (start, and end with the count), not once per request.
 */
async function overloadPlugin(
  app: FastifyInstance,
  { settings, metrics, requestId, bodyLimit, headersFor }: OverloadOptions,
): Promise<void> {
  if (settings.maxEventLoopDelayMs === 0) {
    app.decorate('isUnderPressure', () => false);
    return;
  }
  const answered = new Set<string>();
  app.addHook('onRoute', (route) => {
    if (route.config?.answerWhileShedding === true) answered.add(route.url);
  });
  const mayShed = (url: string) => {
    const query = url.indexOf('?');
    return !answered.has(query === -1 ? url : url.slice(0, query));
  };

  const { body, headers } = overloadedError(settings).prepared;
  // Flat [name, value, ...] as writeHead takes it; the last value is each request's id, written
  // in just before writeHead, which copies the headers at once.
  const shedHeaders = [...Object.entries(headers).flat(), ...['x-content-type-options', 'nosniff', 'x-request-id', '']];
  const closingHeaders = [...shedHeaders.slice(0, -2), 'connection', 'close', 'x-request-id', ''];
  const shedByMethod = new Map<string, CounterSeries>();
  const countShed = (method: string) => {
    let series = shedByMethod.get(method);
    if (series === undefined) {
      series = metrics?.requests.series({ method, operation: SHED, status: '503' });
      if (series === undefined) return;
      shedByMethod.set(method, series);
    }
    series.inc();
    metrics?.rejected('overload');
  };

  let episode: { started: number; shed: number; lastShed: number } | undefined;
  const watch = new LoopWatch(settings.sampleIntervalMs, settings.maxEventLoopDelayMs, (now) => {
    if (episode !== undefined && now - episode.lastShed > EPISODE_QUIET_MS) {
      const { shed, started } = episode;
      app.log.warn({ shed, durationMs: Math.round(now - started) }, 'overload over: requests shed with 503');
      episode = undefined;
    }
  });
  const turns = new TurnWatch();
  app.addHook('onClose', (_instance, done) => {
    watch.stop();
    done();
  });
  app.decorate('isUnderPressure', () => episode !== undefined);

  const shed = (request: IncomingMessage, response: ServerResponse, now: number) => {
    if (episode === undefined) {
      episode = { started: now, shed: 0, lastShed: now };
      app.log.warn({ maxEventLoopDelayMs: settings.maxEventLoopDelayMs }, 'overloaded: shedding requests with 503');
    }
    episode.shed += 1;
    episode.lastShed = now;
    countShed(methodLabel(request.method));
    const closing = moreBodyThan(request, () => bodyLimit);
    if (closing) closeLingeringAfterAnswer(request.socket);
    const own = closing ? closingHeaders : shedHeaders;
    const extra = headersFor?.(request) ?? [];
    const written = extra.length === 0 ? own : [...extra, ...own];
    written[written.length - 1] = requestId(request);
    response.writeHead(503, written).end(body);
  };

  // Swapped rather than built with fastify's serverFactory, which would leave it to this plugin
  // to make the HTTP or HTTPS server with fastify's timeouts and options.
  const { server } = app;
  const [serve] = server.listeners('request') as ((request: IncomingMessage, response: ServerResponse) => void)[];
  if (serve === undefined) throw new Error('overload: the server has no request listener to guard');
  server.removeListener('request', serve);
  server.on('request', function shedOrServe(request: IncomingMessage, response: ServerResponse) {
    // While the loop keeps up, this clock read and comparison are all a request pays.
    const now = performance.now();
    // During an episode every request goes through the turn watch first, so that it sees each
    // turn's first request, not the first one the loop watch lets by.
    const waited = episode === undefined ? 0 : turns.waited(now);
    const late = waited > settings.maxEventLoopDelayMs || watch.saturated(now);
    if (late && mayShed(request.url ?? '')) shed(request, response, now);
    else serve(request, response);
  });
}

export default fp(overloadPlugin, { name: 'overload' });
