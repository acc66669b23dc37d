/** A whole-number setting from the environment, or its default; anything else is an error that names it. */
export function wholeSetting(name: string, fallback: number, env: NodeJS.ProcessEnv = process.env): number {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  if (!/^[0-9]+$/.test(value)) throw new Error(`${name} must be a whole number; got "${value}"`);
  return Number(value);
}

export const PARTS = ['sqlite', 'overload', 'metrics', 'postgres'];

/**
 * `npm run bench`'s settings; BENCH_QUICK=1 (`npm run bench:quick`) shortens the defaults to a few
 * minutes in all, and any setting given still wins.
 */
export function benchSettings(env: NodeJS.ProcessEnv = process.env) {
  const quick = wholeSetting('BENCH_QUICK', 0, env) > 0;
  const list = (name: string) => (env[name] ? env[name].split(',').map((item) => item.trim()) : undefined);
  const parts = list('BENCH_PARTS') ?? PARTS;
  const unknown = parts.filter((part) => !PARTS.includes(part));
  if (unknown.length > 0) throw new Error(`BENCH_PARTS: unknown ${unknown.join(', ')}; known: ${PARTS.join(', ')}`);
  return {
    /** Seconds of load per scenario, server and round, given a second at a time in turns. */
    seconds: Math.max(1, wholeSetting('BENCH_DURATION', quick ? 2 : 6, env)),
    /** Seconds of mixed reads per server life before measuring. */
    warmupSeconds: wholeSetting('BENCH_WARMUP', quick ? 5 : 20, env),
    /** Rounds per table; which server goes first alternates. */
    rounds: Math.max(1, wholeSetting('BENCH_ROUNDS', quick ? 3 : 5, env)),
    /** Also the reads on a 1,000,000-pet table (0 skips them). */
    scale: wholeSetting('BENCH_SCALE', 1, env) > 0,
    /** Concurrent connections of the load generator (closed loop). */
    connections: 50,
    scenarios: list('BENCH_SCENARIOS'),
    parts,
    /** A PostgreSQL server to use; unset, the bench starts one of its own. */
    databaseUrl: env.BENCH_DATABASE_URL === '' ? undefined : env.BENCH_DATABASE_URL,
  };
}

export type BenchSettings = ReturnType<typeof benchSettings>;
