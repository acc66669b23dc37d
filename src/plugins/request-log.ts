import {
  type FastifyBaseLogger,
  LogController,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'pino';
import type pino from 'pino';

/**
 * What may be an API key in a URL: 43 or more URL-safe characters in a row, any of them
 * percent-encoded (once or twice). A key is `psk_` and 43 such characters, however a client encodes it.
 */
const KEY_LIKE_IN_URL = /(?:[A-Za-z0-9_-]|%(?:25)?[0-9A-Fa-f]{2}){43,}/g;
const SHORTEST_KEY_LIKE = 43;

/** The URL as logged: keys are sent only in `Authorization`, but a client may put one in the URL. */
export function withoutKeys(url: string): string {
  // Every request is logged, and nearly every URL is too short to hold a key.
  return url.length < SHORTEST_KEY_LIKE ? url : url.replace(KEY_LIKE_IN_URL, '[redacted]');
}

/** What made a request fail with a 5xx, logged with its one line (the error handler records it). */
const causes = new WeakMap<FastifyRequest, Error>();

/** Records why `request` failed, for its line to name: the failure is logged once, with the request. */
export function recordFailure(request: FastifyRequest, error: Error): void {
  causes.set(request, error);
}

/** Requests whose line is left out: a limit's refusals after the first of a window (LimitLog). */
const unlogged = new WeakSet<FastifyRequest>();

/** Past this many windows open at once (one per key or address over its limit), refusals are logged one by one. */
const MAX_OPEN_WINDOWS = 10_000;

/**
 * A rate limit's refusals, logged once per key or address and window: the first refusal's request
 * line as any other's, with a line naming who reached the limit; the request lines of the others
 * in that window are left out, and when it ends one line says how many were refused. A flood of
 * 429s is then two lines a minute per client instead of one a request (the metrics count every
 * refusal). Never a key: keys are named by their id.
 */
export class LimitLog {
  readonly #windows = new Map<string, { refused: number }>();

  constructor(
    private readonly log: FastifyBaseLogger,
    /** Which limit, as the lines name it. */
    private readonly limit: string,
  ) {}

  /** A refusal of `who` (what `fields` name: a key id or an address), whose window ends at `resetAt` (ms since the epoch). */
  refused(request: FastifyRequest, who: string, fields: Record<string, unknown>, resetAt: number): void {
    const window = this.#windows.get(who);
    if (window !== undefined) {
      window.refused += 1;
      unlogged.add(request);
      return;
    }
    if (this.#windows.size >= MAX_OPEN_WINDOWS) return;
    const opened = { refused: 0 };
    this.#windows.set(who, opened);
    const left = Math.max(0, resetAt - Date.now());
    this.log.info(
      { limit: this.limit, ...fields, retryAfterSeconds: Math.ceil(left / 1000) },
      'rate limit reached: until the window ends, its refusals are counted, not logged one by one',
    );
    setTimeout(() => {
      this.#windows.delete(who);
      if (opened.refused > 0)
        this.log.info({ limit: this.limit, ...fields, refused: opened.refused }, 'rate limit window over');
    }, left).unref();
  }
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * A probe's request line (/healthz, /readyz) is logged at debug level: a balancer checks every
     * second, and a refusal there (not ready) is logged by its cause, not as a failed request.
     */
    probe?: boolean;
  }
}

type Level = 'debug' | 'info' | 'error';
type LevelName = Level | 'fatal' | 'warn' | 'trace' | 'silent';

/**
 * A request's logger, given to fastify as its childLoggerFactory: the pino child bound to the
 * request's id is made when something first logs through it. Most requests log only their own line
 * (RequestLog), which is written through the parent with the id as its first field: the same JSON a
 * child writes. Making a child on every request was a measurable share of it (BENCHMARKS.md).
 */
class RequestLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined;

  constructor(
    readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  get #logger(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings, this.options));
  }

  /** The request's own line, its fields led by the request's id: through the parent, child or not. */
  line(level: Level, fields: object, message: string): void {
    this.parent[level](fields, message);
  }

  get level(): string {
    return this.#logger.level;
  }

  set level(level: string) {
    this.#logger.level = level;
  }

  /** Calls the child's method for `level` as pino's logger would be called, whatever the arguments. */
  #call(level: LevelName, args: unknown[]): void {
    const logger = this.#logger;
    Reflect.apply(logger[level], logger, args);
  }

  fatal(...args: unknown[]): void {
    this.#call('fatal', args);
  }

  error(...args: unknown[]): void {
    this.#call('error', args);
  }

  warn(...args: unknown[]): void {
    this.#call('warn', args);
  }

  info(...args: unknown[]): void {
    this.#call('info', args);
  }

  debug(...args: unknown[]): void {
    this.#call('debug', args);
  }

  trace(...args: unknown[]): void {
    this.#call('trace', args);
  }

  silent(...args: unknown[]): void {
    this.#call('silent', args);
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger.child(bindings, options);
  }
}

/** fastify's childLoggerFactory (a public option): each request's logger, its child made lazily. */
export const requestLogger: NonNullable<FastifyServerOptions['childLoggerFactory']> = (parent, bindings, options) =>
  new RequestLogger(parent, bindings, options);

/** Whether a line at `level` is written: as the request's own line is, by the parent when a RequestLogger. */
function isLevelEnabled(log: FastifyBaseLogger, level: Level): boolean {
  const logger = (log instanceof RequestLogger ? log.parent : log) as Partial<Pick<pino.Logger, 'isLevelEnabled'>>;
  return logger.isLevelEnabled?.(level) ?? true;
}

/** A request's line through its logger: without making a child, when it is a RequestLogger. */
function logLine(log: FastifyBaseLogger, level: Level, fields: object, message: string): void {
  if (log instanceof RequestLogger) log.line(level, fields, message);
  else log[level](fields, message);
}

/**
 * One line per request, when it completes, instead of fastify's two (a limit's 429s after the
 * first of a window excepted: LimitLog). Only method, URL, status and
 * time are logged: never headers, so no `Authorization` value can reach a log, and the URL
 * without any key sent in it.
 */
export class RequestLog extends LogController {
  /**
   * Each request's client, read when it arrives. By the time its line is written the connection
   * may be gone: HAProxy (option http-server-close) closes it as soon as it has the answer, and a
   * closed socket no longer has a peer address, so `request.ip` would then be undefined, with or
   * without X-Forwarded-For.
   */
  readonly #clients = new WeakMap<FastifyRequest, string | undefined>();

  override incomingRequest(request: FastifyRequest): void {
    // The line itself is written when the request completes.
    this.#clients.set(request, request.ip);
  }

  override requestCompleted(error: Error | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (reply.statusCode === 429 && unlogged.has(request)) return;
    // Client errors are routine; only a 5xx is an error of ours (its cause is logged with it).
    const level: Level =
      request.routeOptions.config.probe === true ? 'debug' : reply.statusCode >= 500 ? 'error' : 'info';
    const { log } = reply;
    // At a level that leaves the line out (LOG_LEVEL=warn), it is not made either.
    if (!isLevelEnabled(log, level)) return;
    const line = {
      // First, where a child logger bound to it would write it.
      reqId: request.id,
      method: request.method,
      // As sent: the router may have been given another (undecodable-url.ts).
      url: withoutKeys(request.originalUrl),
      // The client's address: from X-Forwarded-For only when the peer is a trusted proxy (TRUST_PROXY).
      client: this.#clients.get(request) ?? request.ip,
      statusCode: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 10) / 10,
    };
    if (level === 'debug') logLine(log, level, line, 'probe');
    else if (level === 'error') logLine(log, level, { ...line, err: error ?? causes.get(request) }, 'request failed');
    else logLine(log, level, line, 'request');
  }
}
