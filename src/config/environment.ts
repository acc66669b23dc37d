import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { DEFAULT_CONNECTION_LIMITS, DEFAULT_OVERLOAD, DEFAULT_RATE_LIMITS } from '../plugins/settings.js';
import type { ConnectionLimits, OverloadSettings, RateLimitSettings } from '../plugins/settings.js';
import type { DatabaseConfig } from '../storage/index.js';
import { type WebhookSettings, webhookSettingsFrom } from '../events/settings.js';
import type { SynchronousMode } from '../storage/sqlite/index.js';

export interface Config {
  host: string;
  port: number;
  database: DatabaseConfig;
  logLevel: string;
  rateLimit: RateLimitSettings;
  connections: ConnectionLimits;
  /** The URL clients reach this instance at, when it differs from the listen address. */
  publicUrl: string | undefined;
  /** The CA certificate a client needs to trust PUBLIC_URL (a self-signed balancer's): the banner's curl names it. */
  publicUrlCa: string | undefined;
  /** Where the rate limits are counted, shared by all instances; undefined: each counts alone. */
  redisUrl: string | undefined;
  overload: OverloadSettings;
  /** fastify's trustProxy: which peers' X-Forwarded-For names the client (TRUST_PROXY). */
  trustProxy: TrustProxy;
  /** TLS_CERT_FILE and TLS_KEY_FILE: the server speaks HTTPS itself; undefined for plain HTTP. */
  tls: { certFile: string; keyFile: string } | undefined;
  /** Where Prometheus metrics are served; undefined when `METRICS_PORT=off`. */
  metrics: { host: string; port: number } | undefined;
  /** Webhook delivery (WEBHOOK_*). */
  webhooks: WebhookSettings;
  /** SHUTDOWN_DELAY_MS: how long a stopping instance keeps serving, not ready, before it closes. */
  shutdownDelayMs: number;
  /** SHUTDOWN_TIMEOUT_MS: how long, after the delay, requests may take to finish before the process exits anyway. */
  shutdownTimeoutMs: number;
}

// Not OFF: a power loss could then corrupt the database, against the durability the README promises.
const SYNCHRONOUS_MODES: readonly SynchronousMode[] = ['NORMAL', 'FULL', 'EXTRA'];
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** `DATABASE_URL` as a SQLite path, optionally written as `file:path`, `sqlite:path` or `sqlite://path`. */
export function databaseFileFrom(url: string | undefined): string {
  const path = (url ?? '').replace(/^(sqlite:(\/\/)?|file:)/, '') || './data/petstore.db';
  return path === ':memory:' ? path : resolve(path);
}

const POSTGRES_URL = /^postgres(ql)?:\/\//i;
// A scheme of two letters or more: `C:\data` is a path, `mysql://` is not.
const OTHER_SCHEME = /^([a-z][a-z0-9+.-]+):/i;

/**
 * A `postgres://` or `postgresql://` URL is PostgreSQL; anything else with a scheme other than
 * `file:` or `sqlite:` stops the start: it would otherwise become a SQLite file named after it.
 * Messages never repeat the URL, which may hold a password.
 */
function databaseFrom(env: NodeJS.ProcessEnv): DatabaseConfig {
  const url = env.DATABASE_URL ?? '';
  if (POSTGRES_URL.test(url)) {
    if (!URL.canParse(url)) throw new Error('DATABASE_URL is not a valid postgres:// URL');
    return {
      engine: 'postgres',
      url,
      poolSize: wholeNumber('DATABASE_POOL_SIZE', env.DATABASE_POOL_SIZE, 10, 1),
      timeoutMs: wholeNumber('DATABASE_TIMEOUT_MS', env.DATABASE_TIMEOUT_MS, 3000, 1),
    };
  }
  const scheme = OTHER_SCHEME.exec(url)?.[1]?.toLowerCase();
  if (scheme !== undefined && scheme !== 'file' && scheme !== 'sqlite') {
    throw new Error(`DATABASE_URL must be a SQLite file path or a postgres:// URL; a ${scheme}: URL is not supported`);
  }
  return {
    engine: 'sqlite',
    file: databaseFileFrom(url),
    synchronous: oneOf('SQLITE_SYNCHRONOUS', setting(env.SQLITE_SYNCHRONOUS, 'NORMAL'), SYNCHRONOUS_MODES, (value) =>
      value.toUpperCase(),
    ),
  };
}

/** An unset or empty variable is its default: `HOST=` must not mean every interface. */
function setting(value: string | undefined, fallback: string): string {
  return value === undefined || value === '' ? fallback : value;
}

/** One of `allowed`, in any case (`normalise` gives the allowed spelling). */
function oneOf<T extends string>(
  name: string,
  value: string,
  allowed: readonly T[],
  normalise: (value: string) => string,
): T {
  const normal = normalise(value);
  if (!(allowed as readonly string[]).includes(normal)) {
    throw new Error(`${name} must be one of ${allowed.join(', ')}; got "${value}"`);
  }
  return normal as T;
}

function wholeNumber(name: string, value: string | undefined, fallback: number, min: 0 | 1): number {
  if (value === undefined || value === '') return fallback;
  if (!/^(0|[1-9][0-9]{0,8})$/.test(value) || Number(value) < min) {
    throw new Error(`${name} must be a whole number${min === 0 ? ' (0 turns it off)' : ' above 0'}; got "${value}"`);
  }
  return Number(value);
}

/** Past REQUEST_TIMEOUT_MS's default (10 s): a request the server would let finish is not cut off. */
const DEFAULT_SHUTDOWN_TIMEOUT_MS = 30_000;

/** Plain decimal only: `Number()` would also take `0x50` (port 80) or ` ` (any port). */
function portFrom(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  if (!/^(0|[1-9][0-9]{0,4})$/.test(value) || Number(value) > 65535) {
    throw new Error(`${name} must be an integer from 0 to 65535${name === 'PORT' ? '' : ', or off'}; got "${value}"`);
  }
  return Number(value);
}

/**
 * ioredis reads a REDIS_URL's query parameters as client options, ahead of the server's own. These
 * options are what bound how long a request can wait on Redis (src/plugins/rate-limit/redis.ts), so none may be set there.
 */
const REDIS_OPTIONS_OF_OURS = [
  'lazyConnect',
  'enableOfflineQueue',
  'commandTimeout',
  'connectTimeout',
  'maxRetriesPerRequest',
  'retryStrategy',
];

/** A redis:// or rediss:// URL. The value is never echoed: it may hold a password. */
function redisUrlFrom(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  const url = URL.canParse(value) ? new URL(value) : undefined;
  const scheme = url?.protocol;
  if (url === undefined || (scheme !== 'redis:' && scheme !== 'rediss:')) {
    throw new Error(
      `REDIS_URL must be a redis:// or rediss:// URL, e.g. redis://localhost:6379; got ${scheme === undefined ? 'something that is not a URL' : `a ${scheme} URL`}`,
    );
  }
  const ours = REDIS_OPTIONS_OF_OURS.filter((option) => url.searchParams.has(option));
  if (ours.length > 0) {
    throw new Error(
      `REDIS_URL must not set ${ours.join(', ')}: the server sets these so that no request waits on Redis for long`,
    );
  }
  return value;
}

/** `false`, `true` (any peer: only when every connection comes through the proxy), or addresses/CIDRs. */
export type TrustProxy = boolean | string;

/**
 * An address (`10.0.0.5`, `::1`), a CIDR (`10.0.0.0/8`, `fd00::/8`) or one of proxy-addr's named
 * ranges. Checked here: proxy-addr would read `1.5` as the address 1.0.0.5.
 */
function isTrustedPeer(part: string): boolean {
  if (/^(loopback|linklocal|uniquelocal)$/.test(part)) return true;
  const [address = '', prefix, ...rest] = part.split('/');
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^[0-9]{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128));
}

/**
 * TRUST_PROXY: unset/`false`, `true`, or comma-separated addresses, CIDRs and named ranges. A hop
 * count is refused: fastify 5 trusts no peer for one, so every client behind the proxy would share
 * the proxy's address, and one failed-authentication count.
 */
function trustProxyFrom(value: string | undefined): TrustProxy {
  const setting = (value ?? '').trim();
  if (setting === '' || setting.toLowerCase() === 'false') return false;
  if (setting.toLowerCase() === 'true') return true;
  if (/^[0-9]+$/.test(setting)) {
    throw new Error(
      `TRUST_PROXY=${setting} is a hop count, which is not supported (no proxy would be trusted): name the proxy's addresses instead, e.g. TRUST_PROXY=10.0.0.5, a CIDR such as 10.0.0.0/8, or loopback for a proxy on this host`,
    );
  }
  const addresses = setting.split(',').map((part) => part.trim());
  if (!addresses.every(isTrustedPeer)) {
    throw new Error(
      `TRUST_PROXY must be true, false, or comma-separated addresses, CIDRs or named ranges (loopback, linklocal, uniquelocal); got "${value ?? ''}"`,
    );
  }
  return addresses.join(',');
}

function tlsFrom(env: NodeJS.ProcessEnv): Config['tls'] {
  const certFile = env.TLS_CERT_FILE ?? '';
  const keyFile = env.TLS_KEY_FILE ?? '';
  if (certFile === '' && keyFile === '') return undefined;
  if (certFile === '' || keyFile === '') {
    throw new Error('TLS_CERT_FILE and TLS_KEY_FILE go together: set both for HTTPS, or neither');
  }
  return { certFile: resolve(certFile), keyFile: resolve(keyFile) };
}

/** The metrics listener: METRICS_PORT (default 9464, `off` for none) on METRICS_HOST (default loopback). */
function metricsFrom(env: NodeJS.ProcessEnv): Config['metrics'] {
  if (env.METRICS_PORT?.toLowerCase() === 'off') return undefined;
  return { host: setting(env.METRICS_HOST, '127.0.0.1'), port: portFrom('METRICS_PORT', env.METRICS_PORT, 9464) };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return {
    host: setting(env.HOST, '127.0.0.1'),
    port: portFrom('PORT', env.PORT, 3000),
    database: databaseFrom(env),
    logLevel: oneOf('LOG_LEVEL', setting(env.LOG_LEVEL, 'info'), LOG_LEVELS, (value) => value.toLowerCase()),
    rateLimit: {
      perMinute: wholeNumber('RATE_LIMIT_PER_MINUTE', env.RATE_LIMIT_PER_MINUTE, DEFAULT_RATE_LIMITS.perMinute, 0),
      authFailuresPerMinute: wholeNumber(
        'AUTH_FAILURES_PER_MINUTE',
        env.AUTH_FAILURES_PER_MINUTE,
        DEFAULT_RATE_LIMITS.authFailuresPerMinute,
        0,
      ),
    },
    connections: {
      requestTimeoutMs: wholeNumber(
        'REQUEST_TIMEOUT_MS',
        env.REQUEST_TIMEOUT_MS,
        DEFAULT_CONNECTION_LIMITS.requestTimeoutMs,
        1,
      ),
      maxConnections: wholeNumber('MAX_CONNECTIONS', env.MAX_CONNECTIONS, DEFAULT_CONNECTION_LIMITS.maxConnections, 1),
    },
    publicUrl: env.PUBLIC_URL === '' ? undefined : env.PUBLIC_URL,
    publicUrlCa: env.PUBLIC_URL_CA === '' ? undefined : env.PUBLIC_URL_CA,
    redisUrl: redisUrlFrom(env.REDIS_URL),
    metrics: metricsFrom(env),
    webhooks: webhookSettingsFrom(env),
    trustProxy: trustProxyFrom(env.TRUST_PROXY),
    tls: tlsFrom(env),
    shutdownDelayMs: wholeNumber('SHUTDOWN_DELAY_MS', env.SHUTDOWN_DELAY_MS, 0, 0),
    shutdownTimeoutMs: wholeNumber('SHUTDOWN_TIMEOUT_MS', env.SHUTDOWN_TIMEOUT_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS, 1),
    overload: {
      maxEventLoopDelayMs: wholeNumber(
        'OVERLOAD_MAX_EVENT_LOOP_DELAY_MS',
        env.OVERLOAD_MAX_EVENT_LOOP_DELAY_MS,
        DEFAULT_OVERLOAD.maxEventLoopDelayMs,
        0,
      ),
      retryAfterSeconds: wholeNumber(
        'OVERLOAD_RETRY_AFTER_SECONDS',
        env.OVERLOAD_RETRY_AFTER_SECONDS,
        DEFAULT_OVERLOAD.retryAfterSeconds,
        1,
      ),
      sampleIntervalMs: wholeNumber(
        'OVERLOAD_SAMPLE_INTERVAL_MS',
        env.OVERLOAD_SAMPLE_INTERVAL_MS,
        DEFAULT_OVERLOAD.sampleIntervalMs,
        1,
      ),
      burstCpuMs: wholeNumber('OVERLOAD_BURST_CPU_MS', env.OVERLOAD_BURST_CPU_MS, DEFAULT_OVERLOAD.burstCpuMs, 0),
    },
  };
}
