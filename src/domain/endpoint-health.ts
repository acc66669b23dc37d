import type { NextAttempt, ReceiverAnswer } from './retry-policy.js';

/**
 * Why a failed attempt disables its endpoint, or undefined when it does not: the endpoint answered
 * 410 Gone, or every attempt to it failed for `disableAfterMs` (since `failingSince`, the first
 * failure after its last success; undefined when this failure is the first).
 */
export function disableReason(
  answer: ReceiverAnswer,
  failingSince: number | undefined,
  attemptedAt: number,
  disableAfterMs: number,
): string | undefined {
  if ('status' in answer && answer.status === 410) return 'the endpoint answered 410 Gone';
  const since = failingSince ?? attemptedAt;
  const failingFor = attemptedAt - since;
  if (failingFor < disableAfterMs) return undefined;
  return `every attempt failed for ${Math.round(failingFor / 60_000)} minutes, since ${new Date(since).toISOString()}`;
}

/** An attempt as its endpoint's health reads it (storage's AttemptOutcome is one). */
export interface SettledAttempt {
  delivery: { endpointId: number };
  attemptedAt: number;
  next: NextAttempt;
  disable?: string | undefined;
}

/** What a batch of attempts leaves of one endpoint's health, to write to its row. */
export interface EndpointHealth {
  endpointId: number;
  /** A success in the batch: `failingSince` replaces what the row had, rather than filling it. */
  reset: boolean;
  /** The first failure after the batch's last success (or the batch's first failure), if any. */
  failingSince: number | null;
  /** The last reason given in the batch to disable the endpoint, and when. */
  disable: string | null;
  disabledAt: number | null;
}

/**
 * What a batch of settled attempts, in their order, leaves of each endpoint's health, as if they
 * were applied one by one: a success clears the failing time, a failure sets it if none is set,
 * and a reason to disable disables (the last one given stays). Both backends write exactly this, one
 * row per endpoint, in the order of the endpoints' ids; a row's new failing time is
 * `reset ? failingSince : coalesce(row's, failingSince)`.
 */
export function endpointHealth(settled: readonly SettledAttempt[]): EndpointHealth[] {
  const byEndpoint = new Map<number, EndpointHealth>();
  for (const attempt of settled) {
    const { endpointId } = attempt.delivery;
    let health = byEndpoint.get(endpointId);
    if (health === undefined) {
      health = { endpointId, reset: false, failingSince: null, disable: null, disabledAt: null };
      byEndpoint.set(endpointId, health);
    }
    if (attempt.next === 'delivered') {
      health.reset = true;
      health.failingSince = null;
    } else {
      health.failingSince ??= attempt.attemptedAt;
    }
    if (attempt.disable !== undefined) {
      health.disable = attempt.disable;
      health.disabledAt = attempt.attemptedAt;
    }
  }
  return [...byEndpoint.values()].sort((a, b) => a.endpointId - b.endpointId);
}
