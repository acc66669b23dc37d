import type { Metric, Registry } from 'prom-client';

/**
 * Counters and histograms counted in plain numbers, per series resolved once, and handed to
 * prom-client's registry at scrape time. prom-client's own `inc` and `observe` check and hash the
 * labels on every call, on the request path of every request (BENCHMARKS.md). The names,
 * types, labels and text a scrape sees are prom-client's (its registry formats them).
 */

type Labels = Readonly<Record<string, string>>;

interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/** One counter series: `inc` is an addition. */
export class CounterSeries {
  value = 0;
  constructor(readonly labels: Labels) {}

  inc(by = 1): void {
    this.value += by;
  }

  reset(): void {
    this.value = 0;
  }
}

/** One histogram series: `observe` is a sum, a count and one bucket's increment. */
export class HistogramSeries {
  sum = 0;
  count = 0;
  /** Observations per bucket (not cumulative): counts[i] for values up to bounds[i]. */
  readonly counts: number[];

  constructor(
    readonly labels: Labels,
    private readonly bounds: readonly number[],
  ) {
    this.counts = bounds.map(() => 0);
  }

  observe(value: number): void {
    this.sum += value;
    this.count += 1;
    const { bounds } = this;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= (bounds[i] ?? Infinity)) {
        this.counts[i] = (this.counts[i] ?? 0) + 1;
        return;
      }
    }
  }

  reset(): void {
    this.sum = 0;
    this.count = 0;
    this.counts.fill(0);
  }
}

interface FamilyOptions {
  name: string;
  help: string;
  labelNames: readonly string[];
  registers: Registry[];
}

/** A metric's series by their labels, for prom-client's registry (its `Metric` interface, in part). */
abstract class Family<S extends CounterSeries | HistogramSeries> {
  readonly name: string;
  readonly help: string;
  abstract readonly type: 'counter' | 'histogram';
  readonly aggregator = 'sum';
  readonly #labelNames: readonly string[];
  readonly #byKey = new Map<string, S>();
  /** The label objects callers pass again and again (metrics/storage-timing.ts): found by identity. */
  readonly #byObject = new WeakMap<object, S>();

  constructor({ name, help, labelNames, registers }: FamilyOptions) {
    this.name = name;
    this.help = help;
    this.#labelNames = labelNames;
    for (const registry of registers) registry.registerMetric(this as unknown as Metric);
  }

  protected abstract create(labels: Labels): S;

  /** The series of these labels, made on first use; keep it: using it costs no lookup. */
  series(labels: Labels): S {
    let found = this.#byObject.get(labels);
    if (found !== undefined) return found;
    const key = this.#labelNames.map((name) => labels[name] ?? '').join('\u0000');
    found = this.#byKey.get(key);
    if (found === undefined) {
      // In label-name order, as prom-client writes them.
      found = this.create(Object.fromEntries(this.#labelNames.map((name) => [name, labels[name] ?? ''])));
      this.#byKey.set(key, found);
    }
    this.#byObject.set(labels, found);
    return found;
  }

  protected abstract samples(series: S): Sample[];

  /** What prom-client's registry reads at each scrape. Series never counted are left out, as prom-client does. */
  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }> {
    const values = [...this.#byKey.values()].flatMap((series) => this.samples(series));
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  /**
   * prom-client's `registry.resetMetrics()`: every series back to zero, so it reads as never counted.
   * Zeroed, not forgotten: hooks keep the series they resolved and go on counting in them.
   */
  reset(): void {
    for (const series of this.#byKey.values()) series.reset();
  }
}

export class CounterFamily extends Family<CounterSeries> {
  readonly type = 'counter';

  protected create(labels: Labels): CounterSeries {
    return new CounterSeries(labels);
  }

  inc(labels: Labels, by = 1): void {
    this.series(labels).inc(by);
  }

  protected samples(series: CounterSeries): Sample[] {
    return series.value === 0 ? [] : [{ labels: { ...series.labels }, value: series.value }];
  }
}

export class HistogramFamily extends Family<HistogramSeries> {
  readonly type = 'histogram';
  readonly #bounds: readonly number[];

  constructor(options: FamilyOptions & { buckets: readonly number[] }) {
    super(options);
    this.#bounds = options.buckets;
  }

  protected create(labels: Labels): HistogramSeries {
    return new HistogramSeries(labels, this.#bounds);
  }

  observe(labels: Labels, value: number): void {
    this.series(labels).observe(value);
  }

  /** As prom-client's Histogram: cumulative `_bucket`s with `le` first, `+Inf`, `_sum`, `_count`. */
  protected samples(series: HistogramSeries): Sample[] {
    if (series.count === 0) return [];
    let cumulative = 0;
    const buckets = this.#bounds.map((bound, i) => {
      cumulative += series.counts[i] ?? 0;
      return { labels: { le: bound, ...series.labels }, value: cumulative, metricName: `${this.name}_bucket` };
    });
    return [
      ...buckets,
      { labels: { le: '+Inf', ...series.labels }, value: series.count, metricName: `${this.name}_bucket` },
      { labels: { ...series.labels }, value: series.sum, metricName: `${this.name}_sum` },
      { labels: { ...series.labels }, value: series.count, metricName: `${this.name}_count` },
    ];
  }
}
