import fc from 'fast-check';
import t from 'tap';
import { disableReason, endpointHealth, type SettledAttempt } from '../src/domain/endpoint-health.js';
import { jittered, nextAttempt, pastTheLimit, type ReceiverAnswer, retryDelay } from '../src/domain/retry-policy.js';

// The retry policy and endpoint health, the rules the delivery worker and both backends apply.

const MINUTE = 60_000;
const schedule = [0, 5000, 5 * MINUTE, 30 * MINUTE, 2 * 60 * MINUTE];
const longest = Math.max(...schedule);
const status = (code: number, retryAfterMs?: number): ReceiverAnswer => ({ status: code, retryAfterMs });
const failure = fc.oneof(
  fc
    .integer({ min: 300, max: 599 })
    .filter((code) => code !== 410)
    .map((code) => status(code)),
  fc.integer({ min: 100, max: 199 }).map((code) => status(code)),
  fc.string().map((error): ReceiverAnswer => ({ error })),
);
const random = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });

t.test('a retry waits its scheduled delay, within ±10%', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: schedule.length - 1 }), failure, random, (attempt, answer, r) => {
      const delay = retryDelay(schedule, attempt, answer, () => r);
      const scheduled = schedule[attempt] ?? Number.NaN;
      return delay !== undefined && delay >= Math.floor(scheduled * 0.9) && delay <= Math.ceil(scheduled * 1.1);
    }),
  );
  t.equal(
    jittered(1000, () => 0),
    900,
  );
  t.equal(
    jittered(1000, () => 0.5),
    1000,
  );
});

t.test("a 429's or 503's Retry-After is waited when longer, never past the schedule's longest delay", async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: schedule.length - 1 }),
      fc.constantFrom(429, 503),
      fc.oneof(fc.nat(), fc.double({ min: 0, max: 1e300, noNaN: true })),
      random,
      (attempt, code, retryAfter, r) => {
        const delay = retryDelay(schedule, attempt, status(code, retryAfter), () => r) ?? Number.NaN;
        const withoutIt = retryDelay(schedule, attempt, status(code), () => r) ?? Number.NaN;
        return delay === Math.max(withoutIt, Math.min(retryAfter, longest)) && delay <= Math.max(longest * 1.1, 1);
      },
    ),
  );
  t.equal(
    retryDelay(schedule, 1, status(500, 10 * MINUTE), () => 0.5),
    5000,
    'ignored on any other status',
  );
});

t.test('after the last attempt there is no delay, and the message is dead', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: schedule.length, max: 1000 }), failure, (attempt, answer) => {
      return (
        retryDelay(schedule, attempt, answer) === undefined && nextAttempt(schedule, attempt, answer, 0) === 'dead'
      );
    }),
  );
  t.notOk(pastTheLimit(schedule, schedule.length), 'the last attempt is made');
  t.ok(pastTheLimit(schedule, schedule.length + 1), 'none after it');
});

t.test('a 2xx delivers at any attempt, a 410 ends the message, anything else retries while attempts last', async () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: schedule.length + 2 }),
      fc.integer({ min: 200, max: 299 }),
      fc.nat(),
      (attempt, code, at) => nextAttempt(schedule, attempt, status(code), at) === 'delivered',
    ),
  );
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 3 }), fc.nat(), (attempt, at) => {
      return nextAttempt(schedule, attempt, status(410, 1000), at) === 'dead';
    }),
  );
  fc.assert(
    fc.property(fc.integer({ min: 1, max: schedule.length - 1 }), failure, fc.nat(), (attempt, answer, at) => {
      const next = nextAttempt(schedule, attempt, answer, at, () => 0.5);
      return next === at + (schedule[attempt] ?? Number.NaN);
    }),
  );
});

t.test('an endpoint is disabled by a 410, or once every attempt failed for the time allowed', async (t) => {
  const day = 24 * 60 * MINUTE;
  const since = Date.UTC(2026, 0, 1);
  t.equal(disableReason(status(410), undefined, since, day), 'the endpoint answered 410 Gone');
  t.equal(disableReason(status(500), undefined, since, day), undefined, 'a first failure');
  t.equal(disableReason(status(500), since, since + day - 1, day), undefined);
  t.equal(
    disableReason({ error: 'timeout' }, since, since + day, day),
    'every attempt failed for 1440 minutes, since 2026-01-01T00:00:00.000Z',
  );
  fc.assert(
    fc.property(failure, fc.nat(), fc.nat(), fc.integer({ min: 1 }), (answer, start, failingFor, allowed) => {
      return (disableReason(answer, start, start + failingFor, allowed) !== undefined) === failingFor >= allowed;
    }),
  );
});

/** An endpoint's row as health reads and writes it. */
interface Row {
  failingSince: number | null;
  enabled: boolean;
  disabledReason: string | null;
  updatedAt: number;
}

/** Each attempt applied to the row in turn: the rule endpointHealth must agree with. */
function oneByOne(row: Row, attempts: readonly SettledAttempt[]): Row {
  const after = { ...row };
  for (const attempt of attempts) {
    if (attempt.next === 'delivered') after.failingSince = null;
    else after.failingSince ??= attempt.attemptedAt;
    if (attempt.disable !== undefined) {
      Object.assign(after, { enabled: false, disabledReason: attempt.disable, updatedAt: attempt.attemptedAt });
    }
  }
  return after;
}

/** endpointHealth's result written as both backends write it. */
function batched(row: Row, attempts: readonly SettledAttempt[]): Row {
  const [health, ...others] = endpointHealth(attempts);
  if (health === undefined || others.length > 0) throw new Error('one endpoint expected');
  return {
    failingSince: health.reset ? health.failingSince : (row.failingSince ?? health.failingSince),
    enabled: row.enabled && health.disable === null,
    disabledReason: health.disable ?? row.disabledReason,
    updatedAt: health.disabledAt ?? row.updatedAt,
  };
}

const attemptAt = (endpointId: fc.Arbitrary<number>) =>
  fc.record({
    delivery: fc.record({ endpointId }),
    attemptedAt: fc.nat(),
    next: fc.oneof(fc.constantFrom('delivered' as const, 'dead' as const), fc.nat()),
    disable: fc.option(fc.string(), { nil: undefined }),
  });

t.test("a batch of attempts leaves an endpoint's health as applying them one by one would", async () => {
  const row = fc.record({
    failingSince: fc.option(fc.nat(), { nil: null }),
    enabled: fc.boolean(),
    disabledReason: fc.option(fc.string(), { nil: null }),
    updatedAt: fc.nat(),
  });
  fc.assert(
    fc.property(row, fc.array(attemptAt(fc.constant(7)), { minLength: 1, maxLength: 20 }), (before, attempts) => {
      const expected = oneByOne(before, attempts);
      const actual = batched(before, attempts);
      return JSON.stringify(actual) === JSON.stringify(expected);
    }),
  );
});

t.test('a batch gives one health per endpoint, in the order of their ids, each from its own attempts', async () => {
  fc.assert(
    fc.property(fc.array(attemptAt(fc.integer({ min: 1, max: 5 })), { maxLength: 30 }), (attempts) => {
      const healths = endpointHealth(attempts);
      const ids = healths.map((health) => health.endpointId);
      const expectedIds = [...new Set(attempts.map((attempt) => attempt.delivery.endpointId))].sort((a, b) => a - b);
      return (
        JSON.stringify(ids) === JSON.stringify(expectedIds) &&
        healths.every(
          (health) =>
            JSON.stringify(health) ===
            JSON.stringify(endpointHealth(attempts.filter((a) => a.delivery.endpointId === health.endpointId))[0]),
        )
      );
    }),
  );
});
