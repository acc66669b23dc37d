import { type Network, parseNetworks } from './address-guard.js';

export interface WebhookSettings {
  /** How long an attempt may take before it fails (WEBHOOK_TIMEOUT). */
  timeoutMs: number;
  /** The delay before each attempt, the first included (WEBHOOK_RETRY_SCHEDULE). */
  retrySchedule: readonly number[];
  /** Networks deliveries may reach although the guard refuses them by default (WEBHOOK_ALLOWED_NETWORKS). */
  allowedNetworks: readonly Network[];
  /** How long a rotated secret still signs (WEBHOOK_SECRET_GRACE). */
  secretGraceMs: number;
  /** An endpoint whose every attempt failed for this long is disabled (WEBHOOK_DISABLE_AFTER). */
  disableAfterMs: number;
  /** Delivered and dead messages, and attempts, are pruned after this (WEBHOOK_RETENTION). */
  retentionMs: number;
  /** Attempts in flight at once, per instance (WEBHOOK_CONCURRENCY). */
  concurrency: number;
  /**
   * Attempts in flight at once to one endpoint, over every instance (WEBHOOK_ENDPOINT_CONCURRENCY):
   * a slow or dead endpoint holds no more places than this.
   */
  endpointConcurrency: number;
  /**
   * Attempts in flight at once to one account's endpoints, over every instance
   * (WEBHOOK_ACCOUNT_CONCURRENCY): fewer than an instance's places, so that however many of its
   * endpoints hang, other accounts' messages find places.
   */
  accountConcurrency: number;
  /** Endpoints an account may have (WEBHOOK_MAX_ENDPOINTS). */
  maxEndpoints: number;
  /** How often due messages are looked for when nothing wakes the worker (WEBHOOK_POLL_INTERVAL). */
  pollMs: number;
  /**
   * While the event loop is busy this share of the time or more (0 to 1), the worker claims at most
   * once a poll interval, yielding to requests (WEBHOOK_YIELD_AT_UTILIZATION; 1: never yields).
   */
  yieldAtLoopUtilization: number;
}

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** The Standard Webhooks schedule: immediately, then 5 s, 5 min, 30 min, 2, 5, 10, 14, 20 and 24 h. */
export const STANDARD_RETRY_SCHEDULE = [
  0,
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  14 * HOUR,
  20 * HOUR,
  DAY,
];

export const DEFAULT_WEBHOOKS: WebhookSettings = {
  timeoutMs: 15 * SECOND,
  retrySchedule: STANDARD_RETRY_SCHEDULE,
  allowedNetworks: [],
  secretGraceMs: DAY,
  disableAfterMs: DAY,
  retentionMs: 7 * DAY,
  concurrency: 256,
  // Deep enough for one endpoint to take a backlog at the speed of 64 (BENCHMARKS.md), while an
  // account holds a quarter of the places at most: three accounts whose endpoints all hang leave the
  // rest a quarter.
  endpointConcurrency: 32,
  accountConcurrency: 64,
  maxEndpoints: 20,
  pollMs: SECOND,
  yieldAtLoopUtilization: 0.9,
};

const UNITS: Record<string, number> = { ms: 1, s: SECOND, m: MINUTE, h: HOUR, d: DAY };

/** `250ms`, `5s`, `30m`, `2h`, `1d`; a bare number is seconds. */
export function parseDuration(name: string, value: string): number {
  const match = /^([0-9]{1,9})(ms|s|m|h|d)?$/.exec(value.trim());
  if (match === null) throw new Error(`${name} must be durations such as 0, 250ms, 5s, 30m, 2h or 1d; got "${value}"`);
  return Number(match[1]) * (UNITS[match[2] ?? 's'] ?? SECOND);
}

function durationSetting(name: string, value: string | undefined, fallback: number): number {
  return value === undefined || value === '' ? fallback : parseDuration(name, value);
}

/** A share from 0 to 1, such as 0.9. */
function shareSetting(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  const share = Number(value);
  if (!/^[0-9.]+$/.test(value.trim()) || !(share >= 0 && share <= 1)) {
    throw new Error(`${name} must be a share from 0 to 1, such as 0.9; got "${value}"`);
  }
  return share;
}

/** A whole number above 0, such as 20. */
function countSetting(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  if (!/^[1-9][0-9]{0,5}$/.test(value.trim())) {
    throw new Error(`${name} must be a whole number above 0, such as ${fallback}; got "${value}"`);
  }
  return Number(value);
}

/** The WEBHOOK_* variables (docs/configuration.md). */
export function webhookSettingsFrom(env: NodeJS.ProcessEnv): WebhookSettings {
  const schedule = env.WEBHOOK_RETRY_SCHEDULE;
  const pollMs = durationSetting('WEBHOOK_POLL_INTERVAL', env.WEBHOOK_POLL_INTERVAL, DEFAULT_WEBHOOKS.pollMs);
  if (pollMs === 0) throw new Error('WEBHOOK_POLL_INTERVAL must be longer than 0, or the worker never rests');
  return {
    ...DEFAULT_WEBHOOKS,
    timeoutMs: durationSetting('WEBHOOK_TIMEOUT', env.WEBHOOK_TIMEOUT, DEFAULT_WEBHOOKS.timeoutMs),
    retrySchedule:
      schedule === undefined || schedule === ''
        ? STANDARD_RETRY_SCHEDULE
        : schedule.split(',').map((part) => parseDuration('WEBHOOK_RETRY_SCHEDULE', part)),
    allowedNetworks: parseNetworks(env.WEBHOOK_ALLOWED_NETWORKS ?? ''),
    secretGraceMs: durationSetting('WEBHOOK_SECRET_GRACE', env.WEBHOOK_SECRET_GRACE, DEFAULT_WEBHOOKS.secretGraceMs),
    disableAfterMs: durationSetting(
      'WEBHOOK_DISABLE_AFTER',
      env.WEBHOOK_DISABLE_AFTER,
      DEFAULT_WEBHOOKS.disableAfterMs,
    ),
    retentionMs: durationSetting('WEBHOOK_RETENTION', env.WEBHOOK_RETENTION, DEFAULT_WEBHOOKS.retentionMs),
    pollMs,
    concurrency: countSetting('WEBHOOK_CONCURRENCY', env.WEBHOOK_CONCURRENCY, DEFAULT_WEBHOOKS.concurrency),
    endpointConcurrency: countSetting(
      'WEBHOOK_ENDPOINT_CONCURRENCY',
      env.WEBHOOK_ENDPOINT_CONCURRENCY,
      DEFAULT_WEBHOOKS.endpointConcurrency,
    ),
    accountConcurrency: countSetting(
      'WEBHOOK_ACCOUNT_CONCURRENCY',
      env.WEBHOOK_ACCOUNT_CONCURRENCY,
      DEFAULT_WEBHOOKS.accountConcurrency,
    ),
    maxEndpoints: countSetting('WEBHOOK_MAX_ENDPOINTS', env.WEBHOOK_MAX_ENDPOINTS, DEFAULT_WEBHOOKS.maxEndpoints),
    yieldAtLoopUtilization: shareSetting(
      'WEBHOOK_YIELD_AT_UTILIZATION',
      env.WEBHOOK_YIELD_AT_UTILIZATION,
      DEFAULT_WEBHOOKS.yieldAtLoopUtilization,
    ),
  };
}
