// Loaded by server.ts only when tracing is configured (configured.ts): with tracing off, nothing
// of the OpenTelemetry SDK is loaded and no request does any tracing work.
import { FastifyOtelInstrumentation } from '@fastify/otel';
import {
  type Attributes,
  context,
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { FastifyPluginCallback, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { ContractOperation } from '../contract/document.js';
import { ApiError } from '../domain/errors.js';
import type { AttemptSpan, DeliveryTracing } from '../events/tracing.js';
import { decorateStorage } from '../storage/decorate.js';
import type { AttemptOutcome, ClaimedDelivery, Storage } from '../storage/types.js';

/** What a route's request span is named by (its route config, set by app.ts). */
interface TracedOperation {
  operationId: string;
  /** The contract's path template with the base path, e.g. `/v1/pets/{petId}`. */
  route: string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    tracedAs?: TracedOperation;
  }
}

const ACCOUNT_ID = 'petstore.account.id';

/** Tracing as the app uses it; see startTracing. */
export interface Tracing {
  /** @fastify/otel: a request span per request, and a span for each handler. Registered before any route. */
  plugin: FastifyPluginCallback;
  /** The route config naming an operation's request span. */
  routeConfig(operation: ContractOperation, basePath: string): { tracedAs: TracedOperation };
  /** The authentication hook as a span of its own, which sets the request's account id. */
  authentication(authenticate: onRequestHookHandler): onRequestHookHandler;
  /** Every storage call a span (on PostgreSQL, the pg instrumentation's query spans are its children). */
  storage(storage: Storage, engine: 'sqlite' | 'postgres'): Storage;
  /** The traceparent of the active span, when sampled: stored with each event (OpenOptions). */
  readonly traceParent: () => string | undefined;
  deliveries: DeliveryTracing;
  /** Exports the spans still buffered, then stops. */
  shutdown(): Promise<void>;
}

/** A variable's value; empty is unset, as the OpenTelemetry specification has it. */
function setting(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === '' ? undefined : value;
}

/** The exporter OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (or OTEL_EXPORTER_OTLP_PROTOCOL) names; http/protobuf by default. */
function exporterFor(env: NodeJS.ProcessEnv) {
  const protocol =
    setting(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ??
    setting(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') ??
    'http/protobuf';
  if (protocol === 'http/protobuf') return new ProtobufTraceExporter();
  if (protocol === 'http/json') return new JsonTraceExporter();
  throw new Error(`OTLP protocol ${protocol}: traces are exported over HTTP only (http/protobuf or http/json)`);
}

/** The request's path without its query, which may carry what a client searched for. */
function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/** Names the request span by its operation and route template (never the raw path), with the standard attributes. */
function describeRequest(span: Span, request: FastifyRequest): void {
  const attributes: Attributes = {
    'url.path': pathOf(request.originalUrl),
    'url.scheme': request.protocol,
    'network.protocol.version': request.raw.httpVersion,
    'client.address': request.ip,
  };
  const userAgent = request.headers['user-agent'];
  if (userAgent !== undefined) attributes['user_agent.original'] = userAgent;
  const operation = request.routeOptions.config.tracedAs;
  if (operation === undefined) {
    span.updateName(request.method);
  } else {
    span.updateName(`${operation.operationId} ${request.method} ${operation.route}`);
    attributes['http.route'] = operation.route;
    attributes['petstore.operation.id'] = operation.operationId;
  }
  span.setAttributes(attributes);
}

/** A failure's kind, never its message: a database's message may quote the values it refused. */
function failed(span: Span, error: unknown): void {
  // A refusal decided by the store's rules (an ApiError: a 409, a 412) is an answer, not a failure.
  if (error instanceof ApiError) return;
  span.setStatus({ code: SpanStatusCode.ERROR });
  span.setAttribute('error.type', error instanceof Error ? error.name : 'unknown');
}

function outcomeOf(outcome: AttemptOutcome): string {
  return typeof outcome.next === 'number' ? 'retry' : outcome.next;
}

/**
 * Starts the OpenTelemetry SDK from the standard environment (OTEL_EXPORTER_OTLP_*, OTEL_SERVICE_NAME,
 * OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*): spans are exported in batches
 * over OTLP/HTTP, in the background. Must run before `pg` is loaded, for its instrumentation to
 * patch it.
 */
export function startTracing(env: NodeJS.ProcessEnv = process.env): Tracing {
  const exporter = exporterFor(env);
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'petstore' }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] });
  // The AsyncLocalStorage context manager and W3C trace context (traceparent) propagation.
  provider.register();
  const fastify = new FastifyOtelInstrumentation({
    // Spans for the request and the handler; not for each of the dozen small hooks of a request.
    instrumentHooks: false,
    requestHook: describeRequest,
  });
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      fastify,
      // Query texts only (parameterised): never the values. The worker's own queries (no request's
      // span around them) are not traced.
      new PgInstrumentation({ requireParentSpan: true, enhancedDatabaseReporting: false }),
    ],
  });
  const tracer = provider.getTracer('petstore');
  const w3c = new W3CTraceContextPropagator();
  const traceParentOf = (parent: Context) => {
    const carrier: { traceparent?: string } = {};
    w3c.inject(parent, carrier, defaultTextMapSetter);
    return carrier.traceparent;
  };

  const deliveries: DeliveryTracing = {
    detached: (work) => context.with(ROOT_CONTEXT, work),
    startAttempt(delivery: ClaimedDelivery): AttemptSpan {
      const written =
        delivery.traceParent === undefined
          ? undefined
          : trace.getSpanContext(
              w3c.extract(ROOT_CONTEXT, { traceparent: delivery.traceParent }, defaultTextMapGetter),
            );
      // A root of its own trace, linked to the request that wrote the event: it runs later,
      // perhaps in another instance, and each attempt again.
      const span = tracer.startSpan(
        `deliver ${delivery.eventType}`,
        {
          kind: SpanKind.CLIENT,
          root: true,
          links: written === undefined ? [] : [{ context: written }],
          attributes: {
            'http.request.method': 'POST',
            'petstore.webhook.endpoint.id': delivery.endpointId,
            'petstore.webhook.event.id': delivery.eventId,
            'petstore.webhook.event.type': delivery.eventType,
            'petstore.webhook.attempt': delivery.attempt,
          },
        },
        ROOT_CONTEXT,
      );
      return {
        traceParent: traceParentOf(trace.setSpan(ROOT_CONTEXT, span)),
        end(outcome) {
          span.setAttribute('petstore.webhook.outcome', outcomeOf(outcome));
          if (outcome.responseStatus !== undefined)
            span.setAttribute('http.response.status_code', outcome.responseStatus);
          if (outcome.next !== 'delivered') {
            span.setStatus({
              code: SpanStatusCode.ERROR,
              message: outcome.error ?? `answered ${outcome.responseStatus}`,
            });
          }
          span.end();
        },
      };
    },
  };

  return {
    plugin: fastify.plugin(),
    routeConfig: (operation, basePath) => ({
      tracedAs: { operationId: operation.operationId, route: `${basePath}${operation.path}` },
    }),
    authentication: (authenticate) =>
      function authenticateTraced(request, reply, done) {
        const otel = request.opentelemetry();
        // An unsampled request's children would not be sampled either: they are not made.
        if (!otel.enabled || !otel.span.isRecording()) {
          authenticate.call(this, request, reply, done);
          return;
        }
        const span = tracer.startSpan('authenticate', undefined, otel.context);
        context.with(trace.setSpan(otel.context, span), () =>
          authenticate.call(this, request, reply, (error) => {
            const accountId = request.principal?.accountId;
            if (accountId !== undefined) {
              span.setAttribute(ACCOUNT_ID, accountId);
              otel.span.setAttribute(ACCOUNT_ID, accountId);
            }
            span.setAttribute('petstore.auth.outcome', accountId === undefined || reply.sent ? 'refused' : 'accepted');
            span.end();
            done(error);
          }),
        );
      },
    storage: (storage, engine) =>
      decorateStorage(storage, (call, name) => {
        // On SQLite the call is the database's work (synchronous, inside the promise it returns).
        const options =
          engine === 'sqlite'
            ? { kind: SpanKind.CLIENT, attributes: { 'db.system.name': 'sqlite', 'db.operation.name': name } }
            : { kind: SpanKind.INTERNAL };
        return (...args) => {
          // Outside a request (the start), or in one not sampled: no span.
          if (trace.getSpan(context.active())?.isRecording() !== true) return call(...args);
          return tracer.startActiveSpan(name, options, (span) => {
            let result: Promise<unknown>;
            try {
              result = call(...args);
            } catch (error) {
              failed(span, error);
              span.end();
              throw error;
            }
            result.then(
              () => span.end(),
              (error: unknown) => {
                failed(span, error);
                span.end();
              },
            );
            return result;
          });
        };
      }),
    traceParent: () => {
      const active = context.active();
      const sampled = trace.getSpanContext(active)?.traceFlags;
      return sampled !== undefined && (sampled & TraceFlags.SAMPLED) !== 0 ? traceParentOf(active) : undefined;
    },
    deliveries,
    shutdown: () => provider.shutdown(),
  };
}
