import type { FastifyBaseLogger } from 'fastify';
import type { Redis } from 'ioredis';

/**
 * The longest a request waits on Redis. A rate-limit check is one small script, answered in well
 * under a millisecond on a local network and a few across zones; 250 ms is far beyond a healthy
 * answer, yet small enough that a Redis that hangs (rather than refusing connections) adds little
 * to each request before the limit fails open.
 */
export const REDIS_COMMAND_TIMEOUT_MS = 250;

/** How long the start waits for Redis before serving anyway, limits failing open until it answers. */
export const REDIS_START_WAIT_MS = 2_000;

/**
 * A client for the shared rate limits: connected by `connectRedis`, and never queueing a command,
 * so no request waits for a connection. While Redis is down, every command fails at once (the
 * limits fail open) and the client reconnects in the background, forever, backing off to 2 s.
 * ioredis is loaded here, only by a process that shares its limits.
 */
export async function redisClient(url: string): Promise<Redis> {
  const { Redis } = await import('ioredis');
  return new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: REDIS_START_WAIT_MS,
    // A command sent just before the connection drops fails at the first reconnection attempt
    // (the command timeout bounds it anyway) rather than being sent again later.
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2_000),
  });
}

/** Where the client connects, as shown in the banner and logs: no user name or password. */
export function redisLocation(client: Redis): string {
  const { host = 'localhost', port = 6379, db = 0, tls } = client.options;
  const hostname = host.includes(':') ? `[${host}]` : host;
  return `${tls === undefined ? 'redis' : 'rediss'}://${hostname}:${port}${db === 0 ? '' : `/${db}`}`;
}

/**
 * Logs when Redis stops answering and when it answers again: once each per outage, however many
 * requests fail open meanwhile. Only error messages are logged: an ioredis error may carry the
 * command it failed (an AUTH with its password).
 */
export class RedisAvailability {
  private available: boolean | undefined;

  constructor(
    private readonly log: FastifyBaseLogger,
    private readonly location: string,
  ) {}

  /** Watches the client's connection: an error or a (re)connection. */
  watch(client: Redis): this {
    client.on('ready', () => this.answered());
    client.on('error', (error: Error) => this.failed(error));
    return this;
  }

  answered(): void {
    if (this.available === true) return;
    if (this.available === false) {
      this.log.info({ redis: this.location }, 'Redis answers again: rate limits are shared again');
    }
    this.available = true;
  }

  failed(error: Error): void {
    if (this.available === false) return;
    this.available = false;
    this.log.warn(
      { redis: this.location, reason: error.message },
      'Redis is unreachable: rate limits are not enforced until it answers again',
    );
  }
}

/** Connects, waiting at most REDIS_START_WAIT_MS; the client keeps trying in the background. */
export async function connectRedis(client: Redis): Promise<void> {
  if (client.status !== 'wait') return;
  const ready = new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, REDIS_START_WAIT_MS);
    client.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  // A failed first attempt is reported by the 'error' event; the client reconnects by itself.
  client.connect().catch(() => undefined);
  await ready;
}
