/**
 * What a webhook receiver answered: an HTTP status (100-599) with its Retry-After in milliseconds
 * when it gave one, or why there is no status (a refused address, a timeout, a broken connection).
 */
export type ReceiverAnswer = { status: number; retryAfterMs?: number | undefined } | { error: string };

/** What becomes of a message after an attempt: delivered, dead (no attempt left), or when to try again. */
export type NextAttempt = 'delivered' | 'dead' | number;

/** Within ±10% of `delay` (`random` in [0, 1)), so that endpoints failing together do not retry together. */
export function jittered(delay: number, random: () => number = Math.random): number {
  return Math.round(delay * (0.9 + random() * 0.2));
}

/**
 * The delay before the attempt after `attempt` (1 for the first), or undefined when it was the last.
 * A `Retry-After` on a 429 or a 503 longer than the scheduled delay is waited instead, up to the
 * schedule's longest delay: a receiver cannot put its retries further off than the schedule would.
 */
export function retryDelay(
  schedule: readonly number[],
  attempt: number,
  answer: ReceiverAnswer,
  random: () => number = Math.random,
): number | undefined {
  const scheduled = schedule[attempt];
  if (scheduled === undefined) return undefined;
  const retryAfter =
    'status' in answer && (answer.status === 429 || answer.status === 503) ? answer.retryAfterMs : undefined;
  return Math.max(jittered(scheduled, random), Math.min(retryAfter ?? 0, Math.max(...schedule)));
}

/**
 * What an answer to attempt `attempt`, made at `attemptedAt`, means for its message: a 2xx delivers
 * it, a 410 Gone ends it, anything else is tried again on the schedule while attempts are left.
 */
export function nextAttempt(
  schedule: readonly number[],
  attempt: number,
  answer: ReceiverAnswer,
  attemptedAt: number,
  random: () => number = Math.random,
): NextAttempt {
  if ('status' in answer && answer.status >= 200 && answer.status < 300) return 'delivered';
  if ('status' in answer && answer.status === 410) return 'dead';
  const delay = retryDelay(schedule, attempt, answer, random);
  return delay === undefined ? 'dead' : attemptedAt + delay;
}

/**
 * Whether attempt `attempt` is past the limit (one first attempt and a retry per later delay of the
 * schedule): a message claimed again after its last attempt, whose outcome was never recorded, is
 * not sent again.
 */
export const pastTheLimit = (schedule: readonly number[], attempt: number): boolean => attempt > schedule.length;
