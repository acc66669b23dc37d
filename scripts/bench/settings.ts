import { join } from 'node:path';
import { projectRoot } from '../../src/paths.js';

export interface BenchSettings {
  /** Seconds of load per scenario and server in a round (BENCH_DURATION, default 6). */
  seconds: number;
  /** The servers are loaded in turn, this many seconds at a time (BENCH_SLICE, default 1). */
  sliceSeconds: number;
  /**
   * Seconds of mixed load on each server after its start, before its first measurement
   * (BENCH_WARMUP, default 20): throughput is a long-running server's (BENCHMARKS.md, "Warm-up").
   */
  warmupSeconds: number;
  /** Seconds of mixed load between the two RSS readings; 0 skips the soak (BENCH_SOAK, default 60). */
  soakSeconds: number;
  /** Also measure list and get on a 1,000,000-pet table (BENCH_SCALE, 0 skips; default 1). */
  scale: boolean;
  /** Times each scenario is measured on both servers, which goes first alternating (BENCH_ROUNDS, default 5). */
  rounds: number;
  /** Concurrent connections of the load generator (BENCH_CONNECTIONS, default 50). */
  connections: number;
  /** Only these scenarios, by name (BENCH_SCENARIOS, comma-separated; default all). */
  scenarios: string[] | undefined;
}

export const SMALL_TABLE = 10_000;
export const LARGE_TABLE = 1_000_000;
export const RESULTS_DIR = join(projectRoot, 'bench-results');

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

export function benchSettings(env: NodeJS.ProcessEnv = process.env): BenchSettings {
  return {
    seconds: wholeSetting('BENCH_DURATION', 6, 1, env),
    sliceSeconds: wholeSetting('BENCH_SLICE', 1, 1, env),
    warmupSeconds: wholeSetting('BENCH_WARMUP', 20, 0, env),
    soakSeconds: wholeSetting('BENCH_SOAK', 60, 0, env),
    scale: wholeSetting('BENCH_SCALE', 1, 0, env) > 0,
    rounds: wholeSetting('BENCH_ROUNDS', 5, 1, env),
    connections: wholeSetting('BENCH_CONNECTIONS', 50, 1, env),
    scenarios: env.BENCH_SCENARIOS ? env.BENCH_SCENARIOS.split(',').map((name) => name.trim()) : undefined,
  };
}
