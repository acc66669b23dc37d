import { resolve } from 'node:path';
import type { SynchronousMode } from './storage/sqlite/index.js';

export interface Config {
  host: string;
  port: number;
  /** Resolved SQLite file path, or `:memory:`. */
  databaseFile: string;
  logLevel: string;
  synchronous: SynchronousMode;
}

const SYNCHRONOUS_MODES: readonly SynchronousMode[] = ['OFF', 'NORMAL', 'FULL', 'EXTRA'];
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** `DATABASE_URL` is a path, optionally written as `file:path`, `sqlite:path` or `sqlite://path`. */
export function databaseFileFrom(url: string | undefined): string {
  const path = (url ?? '').replace(/^(sqlite:(\/\/)?|file:)/, '') || './data/petstore.db';
  return path === ':memory:' ? path : resolve(path);
}

function oneOf<T extends string>(name: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw new Error(`${name} must be one of ${allowed.join(', ')}; got "${value}"`);
  }
  return value as T;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = Number(env.PORT ?? '3000');
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`PORT must be an integer from 0 to 65535; got "${env.PORT}"`);
  }
  return {
    host: env.HOST ?? '127.0.0.1',
    port,
    databaseFile: databaseFileFrom(env.DATABASE_URL),
    logLevel: oneOf('LOG_LEVEL', env.LOG_LEVEL ?? 'info', LOG_LEVELS),
    synchronous: oneOf('SQLITE_SYNCHRONOUS', (env.SQLITE_SYNCHRONOUS ?? 'NORMAL').toUpperCase(), SYNCHRONOUS_MODES),
  };
}
