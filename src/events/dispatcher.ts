import type { AttemptOutcome, ClaimedDelivery, DeliveryQueue, InFlightCaps } from '../storage/types.js';
import { AddressGuard } from './address-guard.js';
import { LoopLoad } from './loop-load.js';
import type { DeliveryMetrics } from './metrics.js';
import { PayloadVersions } from './payload-versions.js';
import { type SendResult, Sender } from './sender.js';
import type { WebhookSettings } from './settings.js';
import type { DeliveryTracing } from './tracing.js';
import type { VersionChain } from '../versions/chain.js';
import { eventIdOf } from '../domain/events.js';
import { disableReason } from '../domain/endpoint-health.js';
import { nextAttempt, pastTheLimit } from '../domain/retry-policy.js';

/** How long a shutdown waits for attempts in flight before giving the rest back. */
const SHUTDOWN_GRACE_MS = 5000;
/** How often delivered and dead messages past the retention are pruned. */
const PRUNE_EVERY_MS = 60 * 60 * 1000;
/** While the event loop is busy, how soon the worker looks again whether it still is. */
const YIELD_RECHECK_MS = 50;

/** What an attempt's result means for the message and its endpoint (domain/: the retry policy, endpoint health). */
export function outcomeOf(
  delivery: ClaimedDelivery,
  result: SendResult,
  attemptedAt: number,
  settings: Pick<WebhookSettings, 'retrySchedule' | 'disableAfterMs'>,
): AttemptOutcome {
  const base = { delivery, attemptedAt, durationMs: result.durationMs };
  const next = nextAttempt(settings.retrySchedule, delivery.attempt, result, attemptedAt);
  const answer = 'status' in result ? { responseStatus: result.status } : { error: result.error };
  if (next === 'delivered') return { ...base, ...answer, next };
  const disable = disableReason(result, delivery.failingSince, attemptedAt, settings.disableAfterMs);
  return { ...base, ...answer, next, disable };
}

/** A message claimed past its last attempt: dead, with why, and not sent. */
function unsent(delivery: ClaimedDelivery, attemptedAt: number): AttemptOutcome {
  return {
    delivery,
    attemptedAt,
    durationMs: 0,
    error: 'not sent: no attempt left (the outcome of the last one was never recorded)',
    next: 'dead',
  };
}

/** Why a pump stopped claiming, which decides when the worker looks again. */
type PumpEnd = 'drained' | 'busy' | 'yielding';

/**
 * The delivery worker of one instance: claims due messages (leased, so instances never send the
 * same attempt), sends them, records each attempt. Woken when events commit, and by a timer for
 * retries coming due.
 *
 * Delivery is fair (docs/events.md): a claim takes no more messages than leave an endpoint with
 * `endpointConcurrency` in flight and an account with `accountConcurrency`, over every instance,
 * and serves accounts in turn; so a slow or dead endpoint holds only its own places and the other
 * accounts' messages go out meanwhile.
 *
 * Delivery is background work on the event loop that serves the API, so it is done in batches and
 * yields to requests: it claims once half its places are free (not one message per finished
 * attempt), records the attempts finished in one turn of the loop in one transaction, asks when the
 * next message is due only when it found none due now, and while the loop is busy (LoopLoad) or
 * requests wait for the database (PostgreSQL's pool) claims at most once a poll interval, letting
 * the backlog wait until the load drops.
 */
export class Dispatcher {
  private readonly sender: Sender;
  private readonly payloads: PayloadVersions;
  private readonly inFlight = new Map<number, Promise<void>>();
  /** Attempts in flight from this instance, by endpoint. */
  private readonly inFlightTo = new Map<number, number>();
  private readonly leaseMs: number;
  /** A finished attempt wakes the worker once this many places are free: claims come in batches. */
  private readonly batch: number;
  private readonly loop: LoopLoad;
  private readonly caps: InFlightCaps;
  private stopping = false;
  private pumping = false;
  /** The pump under way, which a stop waits for. */
  private pumped: Promise<void> = Promise.resolve();
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  /** Yielding to requests until the timer looks again: a commit's wake-up changes nothing meanwhile. */
  private yielding = false;
  private unlisten: (() => void) | undefined;
  private lastPrune = 0;
  private lastClaim = -Infinity;
  /** Attempts finished in this turn of the loop, recorded together when it ends. */
  private finished: AttemptOutcome[] = [];
  private recorded: Promise<void> | undefined;

  constructor(
    private readonly queue: DeliveryQueue,
    private readonly settings: WebhookSettings,
    /** The API versions served: each endpoint is sent its payloads in its own. */
    versions: VersionChain,
    private readonly metrics?: DeliveryMetrics,
    private readonly onError: (error: unknown) => void = () => undefined,
    private readonly tracing?: DeliveryTracing,
  ) {
    this.sender = new Sender(new AddressGuard(settings.allowedNetworks), settings.timeoutMs);
    this.payloads = new PayloadVersions(versions);
    // A lease outlives the attempt it covers: another instance takes it only if this one died.
    this.leaseMs = settings.timeoutMs + 30_000;
    this.batch = Math.ceil(settings.concurrency / 2);
    this.loop = new LoopLoad(settings.yieldAtLoopUtilization);
    this.caps = { perEndpoint: settings.endpointConcurrency, perAccount: settings.accountConcurrency };
  }

  start(): void {
    const { tracing } = this;
    this.unlisten = this.queue.onCommit(
      tracing === undefined ? () => this.wake() : () => tracing.detached(() => this.wake()),
    );
    this.metrics?.watchBacklog(() => this.queue.backlog());
    this.loop.start();
    this.wake();
  }

  /** Looks for due messages now; a commit's `onCommit` calls it, so it is cheap when it need not. */
  wake(): void {
    if (this.stopping || this.yielding) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    this.pumped = this.pump()
      .then(
        (end) => this.schedule(end),
        (error: unknown) => {
          this.onError(error);
          return this.schedule('drained');
        },
      )
      .catch(this.onError)
      .finally(() => {
        this.pumping = false;
      });
  }

  private async pump(): Promise<PumpEnd> {
    let end: PumpEnd;
    do {
      this.again = false;
      const room = this.settings.concurrency - this.inFlight.size;
      if (room <= 0) return 'busy';
      const now = Date.now();
      const serving = this.loop.busy() || (await this.queue.saturated());
      if (serving && now - this.lastClaim < this.settings.pollMs) return 'yielding';
      this.lastClaim = now;
      const claimed = await this.queue.claim(room, this.leaseMs, this.caps);
      if (this.stopping) {
        // A stop began while claiming: what was taken goes back unattempted.
        if (claimed.length > 0) await this.queue.release(claimed.map((delivery) => delivery.id));
        return 'busy';
      }
      const payloadOf = this.payloads.forClaim();
      for (const delivery of claimed) this.attempt(delivery, payloadOf);
      end = claimed.length < room ? 'drained' : 'busy';
      if (end === 'busy') this.again = true;
    } while (this.again);
    await this.pruneNow();
    return end;
  }

  /**
   * Sets the timer: when the queue had no more due, for the next retry due or the poll interval,
   * whichever is sooner; while yielding, to look again shortly; otherwise (attempts in flight will
   * wake the worker) for the poll interval.
   */
  private async schedule(end: PumpEnd): Promise<void> {
    if (this.stopping) return;
    let wait = end === 'yielding' ? YIELD_RECHECK_MS : this.settings.pollMs;
    if (end === 'drained') {
      const due = await this.queue.nextDueAt(this.caps);
      if (due !== undefined) wait = Math.min(wait, due - Date.now());
    }
    clearTimeout(this.timer);
    this.yielding = end === 'yielding';
    this.timer = setTimeout(
      () => {
        this.yielding = false;
        this.wake();
      },
      Math.max(0, wait),
    );
    this.timer.unref();
  }

  /** Sends `delivery` with the payload `payloadOf` makes of it (in its endpoint's version), and records the attempt. */
  private attempt(delivery: ClaimedDelivery, payloadOf: (delivery: ClaimedDelivery) => string): void {
    const { endpointId } = delivery;
    this.inFlightTo.set(endpointId, (this.inFlightTo.get(endpointId) ?? 0) + 1);
    const attempted = (async () => {
      const attemptedAt = Date.now();
      if (pastTheLimit(this.settings.retrySchedule, delivery.attempt)) {
        // Claimed again once its lease ended, after its last attempt: that attempt's outcome was
        // never recorded (an instance stopped while making it). Nothing is sent past the limit.
        await this.record(unsent(delivery, attemptedAt));
        return;
      }
      const span = this.tracing?.startAttempt(delivery);
      const result = await this.send(delivery, payloadOf, span?.traceParent);
      const outcome = outcomeOf(delivery, result, attemptedAt, this.settings);
      span?.end(outcome);
      this.metrics?.attempted(outcome, Date.now());
      await this.record(outcome);
    })()
      .catch(this.onError)
      .finally(() => {
        this.inFlight.delete(delivery.id);
        const left = (this.inFlightTo.get(endpointId) ?? 1) - 1;
        if (left === 0) this.inFlightTo.delete(endpointId);
        else this.inFlightTo.set(endpointId, left);
        // Claims come in batches: once half the places are free, or half an endpoint's (which its
        // cap may have kept from the last claim while places were free).
        const halfTheEndpoint = left === Math.floor(this.settings.endpointConcurrency / 2);
        if (this.settings.concurrency - this.inFlight.size >= this.batch || halfTheEndpoint) this.wake();
      });
    this.inFlight.set(delivery.id, attempted);
  }

  /** An attempt to send `delivery`; one whose payload cannot be made in its endpoint's version fails unsent. */
  private send(
    delivery: ClaimedDelivery,
    payloadOf: (delivery: ClaimedDelivery) => string,
    traceParent: string | undefined,
  ): Promise<SendResult> {
    let body: string;
    try {
      body = payloadOf(delivery);
    } catch (error) {
      return Promise.resolve({ error: `not sent: ${(error as Error).message}`, durationMs: 0 });
    }
    const { url, secrets } = delivery;
    return this.sender.send({ url, eventId: eventIdOf(delivery.eventId), body, secrets, traceParent });
  }

  /** Records `outcome` with the others finished in this turn of the loop, in one transaction. */
  private record(outcome: AttemptOutcome): Promise<void> {
    this.finished.push(outcome);
    this.recorded ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      const outcomes = this.finished;
      this.finished = [];
      this.recorded = undefined;
      return this.settle(outcomes);
    });
    return this.recorded;
  }

  /**
   * Settles a turn's outcomes together; if that fails, each alone, so that an outcome that cannot be
   * stored fails its own attempt only, never another account's. One left unsettled comes due again
   * when its lease ends, as a new attempt, within the attempt limit.
   */
  private async settle(outcomes: AttemptOutcome[]): Promise<void> {
    try {
      await this.queue.settle(outcomes);
    } catch (error) {
      if (outcomes.length === 1) {
        this.onError(error);
        return;
      }
      for (const outcome of outcomes) await this.queue.settle([outcome]).catch(this.onError);
    }
  }

  private async pruneNow(): Promise<void> {
    const now = Date.now();
    if (now - this.lastPrune < PRUNE_EVERY_MS) return;
    this.lastPrune = now;
    await this.queue.prune(now - this.settings.retentionMs);
  }

  /** Stops claiming; waits for attempts in flight (a few seconds at most), then gives the rest back. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    this.loop.stop();
    this.unlisten?.();
    await this.pumped;
    const pending = [...this.inFlight.keys()];
    const finished = Promise.all(this.inFlight.values()).then(() => true);
    const timedOut = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), SHUTDOWN_GRACE_MS).unref());
    if (!(await Promise.race([finished, timedOut]))) {
      await this.queue.release(pending.filter((id) => this.inFlight.has(id))).catch(this.onError);
    }
    this.sender.close();
  }
}
