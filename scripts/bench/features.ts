/**
 * The features a request pays for, each as a way to run the project without it: by its setting
 * where it has one, else by feature-off.ts. costs.ts counts them under callgrind, one server life
 * each; run.ts's `features` part prices them by CPU time against the project with all of them on,
 * in alternating turns, as it compares the project with the bare reference.
 */
import { join } from 'node:path';
import { PROJECT, type ServerSpec } from './servers.js';
import { projectRoot } from './settings.js';

/**
 * Every feature on: rate limits counted but never reached, the overload check run with a budget
 * no load here exceeds (valgrind's slow loop included), request log at info and metrics
 * (servers.ts's defaults).
 */
export const ALL_ON = {
  RATE_LIMIT_PER_MINUTE: '100000000',
  AUTH_FAILURES_PER_MINUTE: '100000000',
  OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '600000',
};

export interface Feature {
  feature: string;
  /** What the project runs with to go without it. */
  env: Record<string, string>;
}

const featureOff = (feature: string): Feature => ({ feature, env: { BENCH_FEATURE_OFF: feature } });

/** What every request pays for, whatever it asks. */
export const REQUEST_FEATURES: Feature[] = [
  { feature: 'rate-limit counting and headers', env: { RATE_LIMIT_PER_MINUTE: '0' } },
  { feature: 'request log (LOG_LEVEL=info)', env: { LOG_LEVEL: 'warn' } },
  { feature: 'metrics', env: { METRICS_PORT: 'off' } },
  { feature: 'overload check', env: { OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0' } },
  ...['request id', 'deprecation headers', 'compiled serialization'].map(featureOff),
];

/** What an authenticated operation on one pet pays for besides. */
export const OPERATION_FEATURES: Feature[] = ['auth and scope check', 'ETag'].map(featureOff);

/** The project as the price list runs it: every feature on but `without`'s, feature-off.ts loaded. */
export function projectWithout(without?: Feature): ServerSpec {
  const featureOffModule = join(projectRoot, 'dist/scripts/bench/feature-off.js');
  return {
    name: without === undefined ? PROJECT.name : `without ${without.feature}`,
    entry: PROJECT.entry,
    env: { ...ALL_ON, ...without?.env, NODE_OPTIONS: `--import=${featureOffModule}` },
  };
}
