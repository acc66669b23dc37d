import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { AttemptOutcome, DeliveryQueue } from '../storage/types.js';

type Backlog = Awaited<ReturnType<DeliveryQueue['backlog']>>;

/** The delivery worker's metrics, in the service's registry (docs/events.md has an alert on them). */
export class DeliveryMetrics {
  private readonly attempts: Counter<'event_type' | 'outcome'>;
  private readonly latency: Histogram;
  private backlog: () => Promise<Backlog> = async () => ({ pending: 0, oldestCommittedAt: undefined });

  constructor(registry: Registry) {
    this.attempts = new Counter({
      name: 'petstore_webhook_deliveries_total',
      help: 'Delivery attempts, by event type and outcome (delivered, retrying, dead, disabled).',
      labelNames: ['event_type', 'outcome'],
      registers: [registry],
    });
    this.latency = new Histogram({
      name: 'petstore_webhook_delivery_latency_seconds',
      help: "From an event's commit to its endpoint's 2xx, retries included.",
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 300, 3600, 86400],
      registers: [registry],
    });
    const backlog = () => this.backlog();
    new Gauge({
      name: 'petstore_webhook_backlog_messages',
      help: 'Messages not yet delivered (nor dead), on every instance.',
      registers: [registry],
      collect: async function (this: Gauge) {
        this.set((await backlog()).pending);
      },
    });
    new Gauge({
      name: 'petstore_webhook_oldest_undelivered_age_seconds',
      help: 'How long ago the oldest message not yet delivered (nor dead) was committed; 0 when none.',
      registers: [registry],
      collect: async function (this: Gauge) {
        const { oldestCommittedAt } = await backlog();
        this.set(oldestCommittedAt === undefined ? 0 : (Date.now() - oldestCommittedAt) / 1000);
      },
    });
  }

  watchBacklog(backlog: () => Promise<Backlog>): void {
    this.backlog = backlog;
  }

  attempted(outcome: AttemptOutcome, at: number): void {
    const result =
      outcome.disable !== undefined
        ? 'disabled'
        : outcome.next === 'delivered' || outcome.next === 'dead'
          ? outcome.next
          : 'retrying';
    this.attempts.inc({ event_type: outcome.delivery.eventType, outcome: result });
    if (outcome.next === 'delivered') this.latency.observe((at - outcome.delivery.committedAt) / 1000);
  }
}
