import { type EventLoopUtilization, performance } from 'node:perf_hooks';

/** How often the share is taken: the worker reacts to a change of load within this. */
const WINDOW_MS = 50;

/**
 * How busy the event loop is: the share of the last WINDOW_MS it spent running callbacks rather
 * than waiting for I/O (event loop utilization). Lateness would not tell: a loop saturated by many
 * small requests runs each turn short and its timers on time. The delivery worker asks before it
 * claims: when its own work made the loop busy, holding back lowers the share again within a
 * window and it goes on; when requests did, the share stays high and it keeps yielding.
 */
export class LoopLoad {
  private last: EventLoopUtilization | undefined;
  private share = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly limit: number) {}

  start(): void {
    if (this.timer !== undefined || this.limit >= 1) return;
    this.last = performance.eventLoopUtilization();
    this.timer = setInterval(() => {
      const now = performance.eventLoopUtilization();
      this.share = performance.eventLoopUtilization(now, this.last).utilization;
      this.last = now;
    }, WINDOW_MS).unref();
  }

  busy(): boolean {
    return this.timer !== undefined && this.share >= this.limit;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
