import type { AttemptOutcome, ClaimedDelivery, DeliveryQueue } from '../storage/types.js';
import { AddressGuard } from './address-guard.js';
import type { DeliveryMetrics } from './metrics.js';
import { type SendResult, Sender } from './sender.js';
import type { WebhookSettings } from './settings.js';
import { eventIdOf } from './types.js';

/** How long a shutdown waits for attempts in flight before giving the rest back. */
const SHUTDOWN_GRACE_MS = 5000;
/** How often delivered and dead messages past the retention are pruned. */
const PRUNE_EVERY_MS = 60 * 60 * 1000;

/** Within ±10% of `delay`, so that endpoints failing together do not retry together. */
function jittered(delay: number): number {
  return Math.round(delay * (0.9 + Math.random() * 0.2));
}

/** The delay before the attempt after `attempt`, or undefined when it was the last. */
export function retryDelay(schedule: readonly number[], attempt: number, result: SendResult): number | undefined {
  const scheduled = schedule[attempt];
  if (scheduled === undefined) return undefined;
  const retryAfter =
    'status' in result && (result.status === 429 || result.status === 503) ? result.retryAfterMs : undefined;
  return Math.max(jittered(scheduled), retryAfter ?? 0);
}

/** What an attempt's result means for the message and its endpoint. */
export function outcomeOf(
  delivery: ClaimedDelivery,
  result: SendResult,
  attemptedAt: number,
  settings: Pick<WebhookSettings, 'retrySchedule' | 'disableAfterMs'>,
): AttemptOutcome {
  const base = { delivery, attemptedAt, durationMs: result.durationMs };
  if ('status' in result && result.status >= 200 && result.status < 300) {
    return { ...base, responseStatus: result.status, next: 'delivered' };
  }
  const answer = 'status' in result ? { responseStatus: result.status } : { error: result.error };
  if ('status' in result && result.status === 410) {
    return { ...base, ...answer, next: 'dead', disable: 'the endpoint answered 410 Gone' };
  }
  const failingFor = attemptedAt - (delivery.failingSince ?? attemptedAt);
  const disable =
    failingFor >= settings.disableAfterMs
      ? `every attempt failed for ${Math.round(failingFor / 60_000)} minutes, since ${new Date(delivery.failingSince ?? attemptedAt).toISOString()}`
      : undefined;
  const delay = retryDelay(settings.retrySchedule, delivery.attempt, result);
  return { ...base, ...answer, next: delay === undefined ? 'dead' : attemptedAt + delay, disable };
}

/**
 * The delivery worker of one instance: claims due messages (leased, so instances never send the
 * same attempt), sends them, records each attempt. Woken when events commit, and by a timer for
 * retries coming due.
 */
export class Dispatcher {
  private readonly sender: Sender;
  private readonly inFlight = new Map<number, Promise<void>>();
  private readonly leaseMs: number;
  private stopping = false;
  private pumping = false;
  /** The pump under way, which a stop waits for. */
  private pumped: Promise<void> = Promise.resolve();
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private unlisten: (() => void) | undefined;
  private lastPrune = 0;

  constructor(
    private readonly queue: DeliveryQueue,
    private readonly settings: WebhookSettings,
    private readonly metrics?: DeliveryMetrics,
    private readonly onError: (error: unknown) => void = () => undefined,
  ) {
    this.sender = new Sender(new AddressGuard(settings.allowedNetworks), settings.timeoutMs);
    // A lease outlives the attempt it covers: another instance takes it only if this one died.
    this.leaseMs = settings.timeoutMs + 30_000;
  }

  start(): void {
    this.unlisten = this.queue.onCommit(() => this.wake());
    this.metrics?.watchBacklog(() => this.queue.backlog());
    this.wake();
  }

  wake(): void {
    if (this.stopping) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    this.pumped = this.pump()
      .catch(this.onError)
      .finally(() => {
        this.pumping = false;
        if (!this.stopping) void this.schedule().catch(this.onError);
      });
  }

  private async pump(): Promise<void> {
    do {
      this.again = false;
      const room = this.settings.concurrency - this.inFlight.size;
      if (room <= 0) return;
      const claimed = await this.queue.claim(room, this.leaseMs);
      if (this.stopping) {
        // A stop began while claiming: what was taken goes back unattempted.
        if (claimed.length > 0) await this.queue.release(claimed.map((delivery) => delivery.id));
        return;
      }
      for (const delivery of claimed) this.attempt(delivery);
      if (claimed.length === room) this.again = true;
    } while (this.again);
    await this.pruneNow();
  }

  /** Sets the timer for the next retry due, or the poll interval, whichever is sooner. */
  private async schedule(): Promise<void> {
    const due = await this.queue.nextDueAt();
    const wait = due === undefined ? this.settings.pollMs : Math.min(this.settings.pollMs, due - Date.now());
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.wake(), Math.max(0, wait));
    this.timer.unref();
  }

  private attempt(delivery: ClaimedDelivery): void {
    const attempted = (async () => {
      const attemptedAt = Date.now();
      const result = await this.sender.send({
        url: delivery.url,
        eventId: eventIdOf(delivery.eventId),
        body: delivery.body,
        secrets: delivery.secrets,
      });
      const outcome = outcomeOf(delivery, result, attemptedAt, this.settings);
      this.metrics?.attempted(outcome, Date.now());
      await this.queue.settle(outcome);
    })()
      .catch(this.onError)
      .finally(() => {
        this.inFlight.delete(delivery.id);
        this.wake();
      });
    this.inFlight.set(delivery.id, attempted);
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
