import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError, type PreparedAnswer } from '../domain/errors.js';
import { methodLabel } from '../metrics/http.js';
import type { Metrics } from '../metrics/registry.js';
import type { CounterSeries } from '../metrics/series.js';
import { closeLingeringAfterAnswer, moreBodyThan } from '../http/lingering-close.js';
import type { OverloadSettings } from './settings.js';

// Where scripts/contract-check/served.ts imports it from.
export { DEFAULT_OVERLOAD } from './settings.js';

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
  /**
   * A shed request's answer when it is not the overload error as it is (`shedAnswer`): a deprecated
   * operation's carries its deprecation headers, an older version's is in that version's words.
   */
  answerFor?: (request: IncomingMessage) => ShedAnswer | undefined;
}

/** A shed request's 503, prepared once: flat [name, value, ...] headers as writeHead takes them. */
export interface ShedAnswer {
  status: number;
  body: string;
  /** The last value is each request's id, written in just before writeHead, which copies the headers at once. */
  headers: string[];
  /** The same, closing the connection: a body too large to read is on its way. */
  closingHeaders: string[];
}

/** The shed answer of an error's prepared answer, with `extra` headers before its own. */
export function shedAnswer({ body, headers }: PreparedAnswer, extra: readonly string[] = [], status = 503): ShedAnswer {
  const own = [...extra, ...Object.entries(headers).flat()];
  return {
    status,
    body,
    headers: [...own, 'x-content-type-options', 'nosniff', 'x-request-id', ''],
    closingHeaders: [...own, 'x-content-type-options', 'nosniff', 'connection', 'close', 'x-request-id', ''],
  };
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

/** CPU time this process has used (all threads), in ms: one getrusage call. */
const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/**
 * Whether the event loop is behind, and whether it has stayed behind longer than a burst. A timer
 * due every `intervalMs` records when it last ran, so `now - lastRun - intervalMs` is how long the
 * loop has been busy past that due time without coming round: a request read now has waited at
 * least about that long. A tick late past the target begins (or continues) a stretch behind; a tick
 * on time ends it, as CoDel's minimum delay falling below its target does: the queue drained.
 * A stretch outlasts a burst once it has cost `burstCpuMs` of this process's CPU time: its own work,
 * not the wall clock, which the machine's other tenants stretch (on a busy machine a burst took up
 * to three times its CPU time in wall time: BENCHMARKS.md).
 */
class LoopWatch {
  #lastRun = performance.now();
  #lastCpu = cpuMs();
  /** The CPU time when the loop was last on time, while it has stayed behind since. */
  #behindFromCpu: number | undefined;
  readonly #timer: NodeJS.Timeout;

  constructor(
    readonly intervalMs: number,
    readonly targetMs: number,
    readonly burstCpuMs: number,
    onTick: (now: number) => void,
  ) {
    this.#timer = setInterval(() => {
      const now = performance.now();
      const cpu = cpuMs();
      if (now - this.#lastRun - intervalMs <= targetMs) this.#behindFromCpu = undefined;
      else this.#behindFromCpu ??= this.#lastCpu;
      this.#lastRun = now;
      this.#lastCpu = cpu;
      onTick(now);
    }, intervalMs).unref();
  }

  /** Whether the loop is late past the target now: it has not come round for that long. */
  late(now: number): boolean {
    return now - this.#lastRun - this.intervalMs > this.targetMs;
  }

  /** Whether the loop has been behind, without catching up, for more CPU time than a burst's. */
  outlastsBurst(): boolean {
    return cpuMs() - (this.#behindFromCpu ?? this.#lastCpu) > this.burstCpuMs;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/**
 * Turns of the event loop between which it waited for I/O less than this follow one another without
 * a pause. Counted in the loop's idle time, not the wall clock's: a process that shares its CPU is
 * set aside for milliseconds now and then, most of all under the load that makes an episode, and a
 * request read after a long turn has then waited through it all the same (with a wall-clock gap,
 * test/overload.test.ts saw such a request served on a loaded machine).
 */
const BACK_TO_BACK_IDLE_MS = 1;

/** How long the event loop has waited for I/O since the process started, in ms (libuv's count). */
const loopIdleMs = () => performance.eventLoopUtilization().idle;

/**
 * How long a request read now may have waited. A turn of the event loop reads what arrived during
 * the turn before; when turns follow one another without a pause, that is since the turn before
 * began, otherwise since this one began. A turn is from the first request it reads to the
 * setImmediate that request queued (the check phase after the reads). The timer of the loop watch,
 * due again at the start of a turn, sees nothing late there; this does. While shedding, after a long
 * turn the next one sheds what it reads: it is short, and the one after serves again.
 */
class TurnWatch {
  /** Counts the turns: what was decided once in a turn holds for the rest of it. */
  turn = 0;
  #started = 0;
  #previousStarted = 0;
  /** The loop's idle time when the turn before ended. */
  #previousEndedIdle = -Infinity;
  #open = false;
  readonly #close = () => {
    this.#open = false;
    this.#previousEndedIdle = loopIdleMs();
  };

  waited(now: number): number {
    if (!this.#open) {
      this.#open = true;
      this.turn += 1;
      const backToBack = loopIdleMs() - this.#previousEndedIdle < BACK_TO_BACK_IDLE_MS;
      this.#previousStarted = backToBack ? this.#started : now;
      this.#started = now;
      setImmediate(this.#close);
    }
    return now - this.#previousStarted;
  }
}

/**
 * Answers 503 `service_unavailable` with Retry-After to a request that has waited for the event loop
 * past `maxEventLoopDelayMs` once the queue has stood longer than a burst, instead of queueing it
 * until every client times out. That is CoDel's rule (shed only once the queueing delay has stayed
 * above a target for an interval): a burst drains and is served whole, where the target alone (the
 * rule before issue 28) refused most of a burst that the server would have served in well under a
 * second.
 *
 * Hand-written: @fastify/under-pressure (9.x) compares the mean of an event-loop-delay histogram,
 * sampled every `sampleInterval`, in an onRequest hook after fastify has built the request, and
 * has no interval for a burst to drain within; toobusy-js smooths likewise and is unmaintained.
 * This decides per request within the very turn that runs long, before fastify does anything (the
 * server's request listener is wrapped): at twice the capacity a shed must cost far less than a
 * served request, or shedding cannot free the server. The answer's status line, headers and body
 * are prepared once; it is counted with two additions, and logged once per overload episode
 * (start, and end with the count), not once per request.
 */
async function overloadPlugin(
  app: FastifyInstance,
  { settings, metrics, requestId, bodyLimit, answerFor }: OverloadOptions,
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

  const overloaded = shedAnswer(overloadedError(settings).prepared);
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
  const watch = new LoopWatch(settings.sampleIntervalMs, settings.maxEventLoopDelayMs, settings.burstCpuMs, (now) => {
    if (episode !== undefined && now - episode.lastShed > EPISODE_QUIET_MS) {
      const { shed, started } = episode;
      app.log.warn({ shed, durationMs: Math.round(now - started) }, 'overload over: requests shed with 503');
      episode = undefined;
    }
  });
  const turns = new TurnWatch();
  // Whether the loop has been behind longer than a burst, read once a turn: a CPU-time read is a
  // system call, and a turn's requests all waited alike.
  let burstCheckedIn = -1;
  let outlastedBurst = false;
  const outlastsBurst = () => {
    if (burstCheckedIn !== turns.turn) {
      burstCheckedIn = turns.turn;
      outlastedBurst = watch.outlastsBurst();
    }
    return outlastedBurst;
  };
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
    const answer = answerFor?.(request) ?? overloaded;
    const written = closing ? answer.closingHeaders : answer.headers;
    written[written.length - 1] = requestId(request);
    response.writeHead(answer.status, written).end(answer.body);
  };

  // Swapped rather than built with fastify's serverFactory, which would leave it to this plugin
  // to make the HTTP or HTTPS server with fastify's timeouts and options.
  const { server } = app;
  const [serve] = server.listeners('request') as ((request: IncomingMessage, response: ServerResponse) => void)[];
  if (serve === undefined) throw new Error('overload: the server has no request listener to guard');
  server.removeListener('request', serve);
  server.on('request', function shedOrServe(request: IncomingMessage, response: ServerResponse) {
    // While the loop keeps up, a clock read, a few comparisons and a setImmediate per loop turn
    // are all a request pays; a CPU-time read a turn is added while requests wait past the target.
    const now = performance.now();
    const late = turns.waited(now) > settings.maxEventLoopDelayMs || watch.late(now);
    // CoDel: once a queue has stood longer than a burst, shed what waits past the target until a
    // second passes without a shed; before that, serve it: a burst drains.
    if (late && (episode !== undefined || outlastsBurst()) && mayShed(request.url ?? '')) {
      shed(request, response, now);
    } else serve(request, response);
  });
}

export default fp(overloadPlugin, { name: 'overload' });
