import { join } from 'node:path';
import { projectRoot } from '../../src/paths.js';

export interface BenchSettings {
  /** Seconds of load per scenario and server in a round (BENCH_DURATION, default 6; quick 2). */
  seconds: number;
  /** The servers are loaded in turn, this many seconds at a time (BENCH_SLICE, default 1). */
  sliceSeconds: number;
  /** Seconds of mixed load on each server after its start, before measuring (BENCH_WARMUP, default 20; quick 5). */
  warmupSeconds: number;
  /** Seconds of mixed load between the two RSS readings; 0 skips the soak (BENCH_SOAK, default 60; quick 0). */
  soakSeconds: number;
  /** Also measure the reads on a 1,000,000-pet table (BENCH_SCALE, 0 skips; default 1). */
  scale: boolean;
  /** Times each scenario is measured on both servers, which goes first alternating (BENCH_ROUNDS, default 5; quick 3). */
  rounds: number;
  /** Concurrent connections of the load generator (BENCH_CONNECTIONS, default 50). */
  connections: number;
  /** Only these scenarios, by name (BENCH_SCENARIOS, comma-separated; default all). */
  scenarios: string[] | undefined;
  /** Which parts run (BENCH_PARTS, comma-separated: sqlite, overload, metrics, postgres; default all). */
  parts: string[];
  /** A PostgreSQL server to use (BENCH_DATABASE_URL); unset, the bench starts one of its own. */
  databaseUrl: string | undefined;
}

export const SMALL_TABLE = 10_000;
export const LARGE_TABLE = 1_000_000;
export const RESULTS_DIR = join(projectRoot, 'bench-results');
export const PARTS = ['sqlite', 'overload', 'metrics', 'postgres'];

/** A whole-number setting from the environment, or its default; anything else is an error that names it. */
export function wholeSetting(
  name: string,
  fallback: number,
  min: number,
  env: NodeJS.ProcessEnv = process.env,
): number {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  if (!/^[0-9]+$/.test(value) || Number(value) < min) {
    throw new Error(`${name} must be a whole number of at least ${min}; got "${value}"`);
  }
  return Number(value);
}

function listSetting(name: string, env: NodeJS.ProcessEnv): string[] | undefined {
  return env[name] ? env[name].split(',').map((item) => item.trim()) : undefined;
}

/** BENCH_QUICK=1 (`npm run bench:quick`): shorter defaults, a few minutes in all; any setting still overrides. */
export function benchSettings(env: NodeJS.ProcessEnv = process.env): BenchSettings {
  const quick = wholeSetting('BENCH_QUICK', 0, 0, env) > 0;
  const parts = listSetting('BENCH_PARTS', env) ?? PARTS;
  const unknown = parts.filter((part) => !PARTS.includes(part));
  if (unknown.length > 0) throw new Error(`BENCH_PARTS: unknown ${unknown.join(', ')}; known: ${PARTS.join(', ')}`);
  return {
    seconds: wholeSetting('BENCH_DURATION', quick ? 2 : 6, 1, env),
    sliceSeconds: wholeSetting('BENCH_SLICE', 1, 1, env),
    warmupSeconds: wholeSetting('BENCH_WARMUP', quick ? 5 : 20, 0, env),
    soakSeconds: wholeSetting('BENCH_SOAK', quick ? 0 : 60, 0, env),
    scale: wholeSetting('BENCH_SCALE', 1, 0, env) > 0,
    rounds: wholeSetting('BENCH_ROUNDS', quick ? 3 : 5, 1, env),
    connections: wholeSetting('BENCH_CONNECTIONS', 50, 1, env),
    scenarios: listSetting('BENCH_SCENARIOS', env),
    parts,
    databaseUrl: env.BENCH_DATABASE_URL === '' ? undefined : env.BENCH_DATABASE_URL,
  };
}
