import { fileURLToPath } from 'node:url';

/** The repository's root: the bench runs from dist/scripts/bench. */
export const projectRoot = fileURLToPath(new URL('../../../', import.meta.url));

/** A whole-number setting from the environment, or its default; anything else is an error that names it. */
export function wholeSetting(name: string, fallback: number, env: NodeJS.ProcessEnv = process.env): number {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  if (!/^[0-9]+$/.test(value)) throw new Error(`${name} must be a whole number; got "${value}"`);
  return Number(value);
}

export const PARTS = ['sqlite', 'postgres', 'versions', 'webhooks', 'overload', 'balancer'];
/** Run only when BENCH_PARTS names them. */
export const OPTIONAL_PARTS = ['features'];

/** `npm run bench`'s settings (BENCHMARKS.md); BENCH_QUICK=1 shortens the defaults. */
export function benchSettings(env: NodeJS.ProcessEnv = process.env) {
  const quick = wholeSetting('BENCH_QUICK', 0, env) > 0;
  const list = (value: string) => value.split(',').map((item) => item.trim());
  const parts = env.BENCH_PARTS ? list(env.BENCH_PARTS) : PARTS;
  const known = [...PARTS, ...OPTIONAL_PARTS];
  const unknown = parts.filter((part) => !known.includes(part));
  if (unknown.length > 0) throw new Error(`BENCH_PARTS: unknown ${unknown.join(', ')}; known: ${known.join(', ')}`);
  return {
    /** Of each scenario, server and round. */
    seconds: quick ? 2 : 6,
    /** Of each server life, before anything is measured. */
    warmupSeconds: quick ? 5 : 20,
    rounds: Math.max(1, wholeSetting('BENCH_ROUNDS', quick ? 3 : 5, env)),
    parts,
    /** The scenarios measured where two servers are compared: all unless BENCH_SCENARIOS names some. */
    scenarios: env.BENCH_SCENARIOS ? list(env.BENCH_SCENARIOS) : undefined,
  };
}
