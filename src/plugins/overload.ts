import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError, type PreparedAnswer } from '../domain/errors.js';
import { methodLabel } from '../metrics/http.js';
import type { Metrics } from '../metrics/registry.js';
import type { CounterSeries } from '../metrics/series.js';
import { closeAfterAnswer, moreBodyThan } from '../http/lingering-close.js';
import type { OverloadSettings } from './settings.js';

// Where scripts/contract-check/served.ts imports it from.
export { DEFAULT_OVERLOAD } from './settings.js';

/** An overload episode ends after this long without a shed request: /readyz is 200 again and the end is logged. */
const EPISODE_QUIET_MS = 1_000;

/** The operation label of shed requests: they are answered before any route is matched. */
export const SHED = 'shed';

export interface ShedderOptions {
  settings: OverloadSettings;
  metrics?: Metrics | undefined;
  /** The request id of a shed request's answer, as fastify's genReqId gives it to others. */
  requestId: (request: IncomingMessage) => string;
  /** Past this, a shed request's body is not read: its connection is closed after the 503. */
  bodyLimit: number;
}

export interface OverloadOptions {
  /** The guard given to the server (nodeServerFactory in http/node-server.ts), which this plugin completes. */
  shedder: Shedder;
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
}

/** The shed answer of an error's prepared answer, with `extra` headers before its own. */
export function shedAnswer({ body, headers }: PreparedAnswer, extra: readonly string[] = [], status = 503): ShedAnswer {
  const own = [...extra, ...Object.entries(headers).flat()];
  return {
    status,
    body,
    headers: [...own, 'x-content-type-options', 'nosniff', 'x-request-id', ''],
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
 * Hand-written rather than @fastify/under-pressure (docs/decisions.md): under-pressure compares the
 * mean of an event-loop-delay histogram, sampled every `sampleInterval`, in an onRequest hook after
 * fastify has built the request, and has no interval for a burst to drain within; toobusy-js
 * smooths likewise and is unmaintained. This decides per request within the very turn that runs
 * long, before fastify does anything: the server calls fastify's handler through `guard`
 * (fastify's `serverFactory`, http/node-server.ts). At twice the capacity a shed must cost far less
 * than a served request, or shedding cannot free the server. The answer's status line, headers and
 * body are prepared once; it is counted with two additions, and logged once per overload episode
 * (start, and end with the count), not once per request.
 *
 * Made before fastify (the server is), and completed by the overload plugin, which gives it the
 * app's log, the routes answered while shedding and the answers of each operation. Until then it
 * sheds nothing.
 */
export class Shedder {
  readonly #settings: OverloadSettings;
  readonly #requestId: (request: IncomingMessage) => string;
  readonly #bodyLimit: number;
  readonly #overloaded: ShedAnswer;
  readonly #countShed: (method: string) => void;
  #answerFor: ((request: IncomingMessage) => ShedAnswer | undefined) | undefined;
  #app: FastifyInstance | undefined;
  /** The paths of routes answered while shedding (answerWhileShedding). */
  readonly #answered = new Set<string>();
  #episode: { started: number; shed: number; lastShed: number } | undefined;
  #watch: LoopWatch | undefined;
  readonly #turns = new TurnWatch();
  // Whether the loop has been behind longer than a burst, read once a turn: a CPU-time read is a
  // system call, and a turn's requests all waited alike.
  #burstCheckedIn = -1;
  #outlastedBurst = false;

  constructor({ settings, metrics, requestId, bodyLimit }: ShedderOptions) {
    this.#settings = settings;
    this.#requestId = requestId;
    this.#bodyLimit = bodyLimit;
    this.#overloaded = shedAnswer(overloadedError(settings).prepared);
    const shedByMethod = new Map<string, CounterSeries>();
    this.#countShed = (method) => {
      let series = shedByMethod.get(method);
      if (series === undefined) {
        series = metrics?.requests.series({ method, operation: SHED, status: '503' });
        if (series === undefined) return;
        shedByMethod.set(method, series);
      }
      series.inc();
      metrics?.rejected('overload');
    };
  }

  /** Whether an overload episode is on: a request was shed within the last second. */
  get underPressure(): boolean {
    return this.#episode !== undefined;
  }

  /** Completes the shedder with the app it guards (the overload plugin); it sheds from now on. */
  attach(app: FastifyInstance, answerFor: OverloadOptions['answerFor']): void {
    const settings = this.#settings;
    if (settings.maxEventLoopDelayMs === 0) return;
    this.#app = app;
    this.#answerFor = answerFor;
    app.addHook('onRoute', (route) => {
      if (route.config?.answerWhileShedding === true) this.#answered.add(route.url);
    });
    const watch = new LoopWatch(settings.sampleIntervalMs, settings.maxEventLoopDelayMs, settings.burstCpuMs, (now) => {
      if (this.#episode !== undefined && now - this.#episode.lastShed > EPISODE_QUIET_MS) {
        const { shed, started } = this.#episode;
        app.log.warn({ shed, durationMs: Math.round(now - started) }, 'overload over: requests shed with 503');
        this.#episode = undefined;
      }
    });
    this.#watch = watch;
    app.addHook('onClose', (_instance, done) => {
      watch.stop();
      done();
    });
  }

  /** fastify's handler behind the shed check: what the server calls for every request. */
  readonly guard = (serve: RequestListener): RequestListener => {
    if (this.#settings.maxEventLoopDelayMs === 0) return serve;
    const { maxEventLoopDelayMs } = this.#settings;
    const turns = this.#turns;
    return (request, response) => {
      const watch = this.#watch;
      // Not yet attached (no plugin registered): nothing is shed.
      if (watch === undefined) {
        serve(request, response);
        return;
      }
      // While the loop keeps up, a clock read, a few comparisons and a setImmediate per loop turn
      // are all a request pays; a CPU-time read a turn is added while requests wait past the target.
      const now = performance.now();
      const late = turns.waited(now) > maxEventLoopDelayMs || watch.late(now);
      // CoDel: once a queue has stood longer than a burst, shed what waits past the target until a
      // second passes without a shed; before that, serve it: a burst drains.
      if (late && (this.#episode !== undefined || this.#outlastsBurst(watch)) && this.#mayShed(request.url ?? '')) {
        this.#shed(request, response, now);
      } else serve(request, response);
    };
  };

  #outlastsBurst(watch: LoopWatch): boolean {
    if (this.#burstCheckedIn !== this.#turns.turn) {
      this.#burstCheckedIn = this.#turns.turn;
      this.#outlastedBurst = watch.outlastsBurst();
    }
    return this.#outlastedBurst;
  }

  #mayShed(url: string): boolean {
    const query = url.indexOf('?');
    return !this.#answered.has(query === -1 ? url : url.slice(0, query));
  }

  #shed(request: IncomingMessage, response: ServerResponse, now: number): void {
    if (this.#episode === undefined) {
      this.#episode = { started: now, shed: 0, lastShed: now };
      this.#app?.log.warn(
        { maxEventLoopDelayMs: this.#settings.maxEventLoopDelayMs },
        'overloaded: shedding requests with 503',
      );
    }
    this.#episode.shed += 1;
    this.#episode.lastShed = now;
    this.#countShed(methodLabel(request.method));
    if (moreBodyThan(request, () => this.#bodyLimit)) closeAfterAnswer(response);
    const answer = this.#answerFor?.(request) ?? this.#overloaded;
    const { headers } = answer;
    headers[headers.length - 1] = this.#requestId(request);
    response.writeHead(answer.status, headers).end(answer.body);
  }
}

/** Completes the shedder (see Shedder) and tells the app whether it is under pressure (/readyz). */
async function overloadPlugin(app: FastifyInstance, { shedder, answerFor }: OverloadOptions): Promise<void> {
  shedder.attach(app, answerFor);
  app.decorate('isUnderPressure', () => shedder.underPressure);
}

export default fp(overloadPlugin, { name: 'overload' });
