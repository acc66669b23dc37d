import { performance } from 'node:perf_hooks';

/** How often the timer is due: a busy stretch shorter than this goes unseen. */
const INTERVAL_MS = 10;

/**
 * Whether the event loop is busy serving: a timer due every INTERVAL_MS records how late it ran.
 * The loop counts as late when the last two runs were both late past the limit (one stall, a
 * garbage collection or the CPU taken by another process, is not load), or when the timer is
 * overdue past it now. The delivery worker asks before it claims, so that it yields to requests.
 */
export class LoopLag {
  private lastRun = performance.now();
  private lateness = [0, 0];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly limitMs: number) {}

  start(): void {
    this.timer ??= setInterval(() => {
      const now = performance.now();
      this.lateness = [this.lateness[1] ?? 0, now - this.lastRun - INTERVAL_MS];
      this.lastRun = now;
    }, INTERVAL_MS).unref();
  }

  late(): boolean {
    if (this.timer === undefined || this.limitMs <= 0) return false;
    const overdue = performance.now() - this.lastRun - INTERVAL_MS;
    return overdue > this.limitMs || this.lateness.every((lateness) => lateness > this.limitMs);
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
