import type { AttemptOutcome, ClaimedDelivery } from '../storage/types.js';

/** One delivery attempt's span, started as the attempt is. */
export interface AttemptSpan {
  /** The W3C traceparent the receiver is sent: this span's, so that its own trace joins it. */
  traceParent: string | undefined;
  end(outcome: AttemptOutcome): void;
}

/**
 * How the worker is traced, when tracing is on (src/tracing/): each attempt is a span of its own,
 * linked to the trace of the request that wrote the event, not a child of it.
 */
export interface DeliveryTracing {
  /** Runs `work` outside any request's trace (a commit wakes the worker from within the request). */
  detached<T>(work: () => T): T;
  startAttempt(delivery: ClaimedDelivery): AttemptSpan;
}
