import type { IncomingHttpHeaders } from 'node:http';
import type { Teardown } from './backend.js';
import { loopbackServer } from './receiver.js';

/** A span as an OTLP/JSON export carries it, its attributes read into plain values. */
export interface CollectedSpan {
  traceId: string;
  spanId: string;
  /** Undefined for a root span. */
  parentSpanId: string | undefined;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  /** The exporting process's resource attributes. */
  resource: Record<string, unknown>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}
type OtlpAttributes = { key: string; value: OtlpValue }[] | undefined;
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: OtlpAttributes;
  links?: { traceId: string; spanId: string }[];
}
interface OtlpExport {
  resourceSpans?: { resource?: { attributes?: OtlpAttributes }; scopeSpans?: { spans?: OtlpSpan[] }[] }[];
}

function valueOf(value: OtlpValue): unknown {
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(valueOf);
  return value.stringValue ?? value.doubleValue ?? value.boolValue;
}

function attributesOf(attributes: OtlpAttributes): Record<string, unknown> {
  return Object.fromEntries((attributes ?? []).map(({ key, value }) => [key, valueOf(value)]));
}

/** The spans of an OTLP/JSON ExportTraceServiceRequest. */
function spansOf(body: OtlpExport): CollectedSpan[] {
  return (body.resourceSpans ?? []).flatMap(({ resource, scopeSpans }) => {
    const resourceAttributes = attributesOf(resource?.attributes);
    return (scopeSpans ?? []).flatMap(({ spans }) =>
      (spans ?? []).map((span) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId === undefined || span.parentSpanId === '' ? undefined : span.parentSpanId,
        name: span.name,
        kind: span.kind,
        attributes: attributesOf(span.attributes),
        links: (span.links ?? []).map(({ traceId, spanId }) => ({ traceId, spanId })),
        resource: resourceAttributes,
      })),
    );
  });
}

/** How the collector answers an export: at once (`ok`), or never (`hang`, a collector that is stuck). */
export type CollectorMode = 'ok' | 'hang';

/**
 * An OTLP/HTTP trace receiver on 127.0.0.1, as a collector is: it takes exports at /v1/traces and
 * decodes those sent as JSON (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json). Its `endpoint` is
 * what OTEL_EXPORTER_OTLP_ENDPOINT names.
 */
export async function startCollector(t: Teardown, mode: CollectorMode = 'ok') {
  const spans: CollectedSpan[] = [];
  const exports: { path: string; headers: IncomingHttpHeaders }[] = [];
  const waiters = new Set<() => void>();
  const { port } = await loopbackServer(t, (request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      exports.push({ path: request.url ?? '', headers: request.headers });
      if (request.headers['content-type'] === 'application/json') {
        spans.push(...spansOf(JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpExport));
      }
      for (const waiter of waiters) waiter();
      if (mode === 'ok') response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    exports,
    /** Resolves with `found(spans)` once it is defined, as exports arrive (rejects after `timeoutMs`). */
    waitFor: <T>(found: (spans: CollectedSpan[]) => T | undefined, timeoutMs = 20_000) =>
      new Promise<T>((resolve, reject) => {
        const check = () => {
          const result = found(spans);
          if (result === undefined) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(result);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`not among the ${spans.length} spans collected: ${spans.map((s) => s.name).join(', ')}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
  };
}
