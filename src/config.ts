import { resolve } from 'node:path';
import { type ConnectionLimits, DEFAULT_CONNECTION_LIMITS } from './app.js';
import { DEFAULT_RATE_LIMITS, type RateLimitSettings } from './plugins/rate-limit.js';
import type { SynchronousMode } from './storage/sqlite/index.js';

export interface Config {
  host: string;
  port: number;
  /** Resolved SQLite file path, or `:memory:`. */
  databaseFile: string;
  logLevel: string;
  synchronous: SynchronousMode;
  rateLimit: RateLimitSettings;
  connections: ConnectionLimits;
  /** The URL clients reach this instance at, when it differs from the listen address. */
  publicUrl: string | undefined;
  /** Where Prometheus metrics are served; undefined when `METRICS_PORT=off`. */
  metrics: { host: string; port: number } | undefined;
}

const SYNCHRONOUS_MODES: readonly SynchronousMode[] = ['OFF', 'NORMAL', 'FULL', 'EXTRA'];
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** `DATABASE_URL` is a path, optionally written as `file:path`, `sqlite:path` or `sqlite://path`. */
export function databaseFileFrom(url: string | undefined): string {
  const path = (url ?? '').replace(/^(sqlite:(\/\/)?|file:)/, '') || './data/petstore.db';
  return path === ':memory:' ? path : resolve(path);
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

/** Plain decimal only: `Number()` would also take `0x50` (port 80) or ` ` (any port). */
function portFrom(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  if (!/^(0|[1-9][0-9]{0,4})$/.test(value) || Number(value) > 65535) {
    throw new Error(`${name} must be an integer from 0 to 65535${name === 'PORT' ? '' : ', or off'}; got "${value}"`);
  }
  return Number(value);
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
    databaseFile: databaseFileFrom(env.DATABASE_URL),
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
    metrics: metricsFrom(env),
    synchronous: oneOf('SQLITE_SYNCHRONOUS', setting(env.SQLITE_SYNCHRONOUS, 'NORMAL'), SYNCHRONOUS_MODES, (value) =>
      value.toUpperCase(),
    ),
  };
}
