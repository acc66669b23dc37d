import { randomUUID } from 'node:crypto';
import t from 'tap';
import type { Pet } from '../src/storage/types.js';
import { tracingConfigured } from '../src/tracing/configured.js';
import type { Teardown } from './helpers/api.js';
import { backend, newDatabase, probeDatabase } from './helpers/backend.js';
import { type CollectedSpan, type CollectorMode, startCollector } from './helpers/collector.js';
import { clientOf, databaseWithKey, failedStart, startServerProcess } from './helpers/process.js';
import { closedPort, startReceiver } from './helpers/receiver.js';
import type { WithSecret } from './helpers/webhooks.js';

// Tracing is process-global in OpenTelemetry: each test runs the real server as a child process,
// exporting to a collector of its own on loopback.

const SERVER = 2;
const CLIENT = 3;

/** A server process exporting its traces as OTLP/JSON to `endpoint`, soon after each span ends. */
async function tracedServer(t: Teardown, endpoint: string, env: Record<string, string> = {}) {
  const databaseUrl = await newDatabase(t);
  const key = await databaseWithKey(databaseUrl);
  const server = await startServerProcess(t, {
    DATABASE_URL: databaseUrl,
    WEBHOOK_ALLOWED_NETWORKS: 'loopback',
    OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: 'petstore-under-test',
    OTEL_BSP_SCHEDULE_DELAY: '50',
    ...env,
  });
  return { databaseUrl, key, server, api: clientOf(server, key) };
}

const named = (name: string) => (spans: CollectedSpan[]) => spans.find((span) => span.name === name);
const childrenOf = (spans: CollectedSpan[], parent: CollectedSpan) =>
  spans.filter((span) => span.traceId === parent.traceId && span.parentSpanId === parent.spanId);

t.test('tracing is configured by the standard variables only', async (t) => {
  t.notOk(tracingConfigured({}), 'off by default');
  t.ok(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }));
  t.ok(tracingConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' }));
  t.ok(tracingConfigured({ OTEL_TRACES_EXPORTER: 'otlp' }), 'the OTLP exporter asked for by name');
  t.notOk(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' }));
  t.notOk(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_TRACES_EXPORTER: 'none' }));
  const grpc = failedStart({
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4317',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
  });
  t.equal(grpc.code, 1, 'an OTLP protocol other than HTTP stops the start');
  t.match(grpc.stderr, /OTLP protocol grpc: traces are exported over HTTP only/);
});

t.test("a create's trace: its spans, their shape, and its webhook deliveries linked to it", async (t) => {
  const collector = await startCollector(t);
  // The first attempt is answered 503 and retried: each attempt is a span.
  const receiver = await startReceiver(t, (_received, index) => ({ status: index === 0 ? 503 : 204 }));
  const { databaseUrl, key, server, api } = await tracedServer(t, collector.endpoint, {
    WEBHOOK_RETRY_SCHEDULE: '0,100ms',
  });
  t.match(server.output(), /traces: exported over OTLP\/HTTP/);
  const endpoint = await api<WithSecret>('POST', '/webhooks', { url: receiver.url, events: ['pet.created'] });
  t.equal(endpoint.status, 201);
  // A balancer's health check is not traced (it is no operation of the contract).
  const health = await fetch(new URL('/healthz', server.baseUrl));
  t.same({ status: health.status, body: await health.json() }, { status: 200, body: { status: 'ok' } });
  const name = `Traced ${randomUUID()}`;
  // The client's own trace, which the server's continues.
  const clientTrace = randomUUID().replaceAll('-', '');
  const clientSpan = clientTrace.slice(0, 16);
  const created = await api<Pet>(
    'POST',
    '/pets',
    { name, categoryId: 1 },
    {
      traceparent: `00-${clientTrace}-${clientSpan}-01`,
    },
  );
  t.equal(created.status, 201);
  await receiver.waitFor(2);

  const request = await collector.waitFor(named('createPet POST /v1/pets'));
  t.equal(request.traceId, clientTrace, "the incoming traceparent's trace is continued");
  t.equal(request.parentSpanId, clientSpan, 'as a child of the caller');
  t.equal(request.kind, SERVER);
  const probe = await probeDatabase(t, databaseUrl);
  const [owner] = await probe.query<{ accountId: number | string }>('SELECT account_id AS "accountId" FROM api_keys');
  t.match(request.attributes, {
    'http.request.method': 'POST',
    'http.route': '/v1/pets',
    'http.response.status_code': 201,
    'url.path': '/v1/pets',
    'url.scheme': 'http',
    'petstore.operation.id': 'createPet',
    'petstore.account.id': Number(owner?.accountId),
  });
  t.equal(request.resource['service.name'], 'petstore-under-test', 'OTEL_SERVICE_NAME names the service');

  // Spans end, and are exported, children first: each awaited before its parent's shape is read.
  const authentication = await collector.waitFor((spans) =>
    childrenOf(spans, request).find((span) => span.name === 'authenticate'),
  );
  t.match(authentication.attributes, {
    'petstore.account.id': Number(owner?.accountId),
    'petstore.auth.outcome': 'accepted',
  });
  const lookup = await collector.waitFor((spans) => childrenOf(spans, authentication)[0]);
  t.equal(lookup.name, 'accounts.findPrincipal', 'the key looked up inside authentication');
  const handler = await collector.waitFor((spans) =>
    childrenOf(spans, request).find((span) => span.name.startsWith('handler')),
  );
  const write = await collector.waitFor((spans) =>
    childrenOf(spans, handler).find((span) => span.name === 'pets.create'),
  );
  if (backend === 'sqlite') {
    t.match(write, { kind: CLIENT, attributes: { 'db.system.name': 'sqlite', 'db.operation.name': 'pets.create' } });
  } else {
    const queries = await collector.waitFor((spans) => {
      const found = childrenOf(spans, write).filter((span) => span.attributes['db.system.name'] === 'postgresql');
      return found.length > 0 ? found : undefined;
    });
    t.ok(
      queries.every((query) => query.kind === CLIENT),
      "the pg instrumentation's queries are children of the storage call",
    );
  }

  const attempts = await collector.waitFor((spans) => {
    const found = spans.filter((span) => span.name === 'deliver pet.created');
    return found.length === 2
      ? found.sort(
          (a, b) => Number(a.attributes['petstore.webhook.attempt']) - Number(b.attributes['petstore.webhook.attempt']),
        )
      : undefined;
  });
  for (const [index, attempt] of attempts.entries()) {
    t.equal(attempt.kind, CLIENT);
    t.equal(attempt.parentSpanId, undefined, 'an attempt is not a child of the request');
    t.not(attempt.traceId, clientTrace, 'but a trace of its own');
    t.equal(attempt.links.length, 1);
    t.equal(attempt.links[0]?.traceId, clientTrace, "linked to the create's trace");
    t.match(attempt.attributes, {
      'petstore.webhook.endpoint.id': endpoint.body.id,
      'petstore.webhook.attempt': index + 1,
      'petstore.webhook.outcome': index === 0 ? 'retry' : 'delivered',
      'http.response.status_code': index === 0 ? 503 : 204,
    });
    t.equal(
      receiver.received[index]?.headers.traceparent,
      `00-${attempt.traceId}-${attempt.spanId}-01`,
      "the receiver is sent the attempt's traceparent",
    );
  }

  // Spans are exported in the order they end: the health check's would have come before the create's.
  t.notOk(
    collector.spans.some((span) => span.attributes['url.path'] === '/healthz'),
    'no span for the health check',
  );
  const everything = JSON.stringify(collector.spans);
  for (const [what, secret] of [
    ['the API key', key],
    ['the signing secret', endpoint.body.secret],
    ["the request body's pet name", name],
    ['the database URL', databaseUrl],
  ] as const) {
    t.notOk(everything.includes(secret), `no span carries ${what}`);
  }
  t.notOk(everything.includes('"body"'), 'nor any body');
});

for (const mode of ['down', 'hang'] as const) {
  t.test(`a collector that is ${mode === 'down' ? 'down' : 'stuck'} changes nothing for clients`, async (t) => {
    let endpoint = `http://127.0.0.1:${await closedPort()}`;
    let collector: Awaited<ReturnType<typeof startCollector>> | undefined;
    if (mode === 'hang') {
      collector = await startCollector(t, mode satisfies CollectorMode);
      endpoint = collector.endpoint;
    }
    const { api } = await tracedServer(t, endpoint);
    for (let i = 0; i < 20; i++) {
      const created = await api<Pet>('POST', '/pets', { name: `Rex ${i}`, categoryId: 1 });
      t.equal(created.status, 201);
      const read = await api<Pet>('GET', `/pets/${created.body.id}`);
      t.same(read, { status: 200, body: created.body });
      // Some requests are answered while an export hangs.
      if (collector !== undefined && i === 0)
        await collector.waitFor((spans) => (collector.exports.length > 0 ? spans : undefined));
    }
  });
}

t.test('off by default: no traceparent is sent, the banner says how to turn it on', async (t) => {
  const receiver = await startReceiver(t);
  const databaseUrl = await newDatabase(t);
  const key = await databaseWithKey(databaseUrl);
  const server = await startServerProcess(t, { DATABASE_URL: databaseUrl, WEBHOOK_ALLOWED_NETWORKS: 'loopback' });
  t.match(server.output(), /traces: off \(set OTEL_EXPORTER_OTLP_ENDPOINT to export them\)/);
  const api = clientOf(server, key);
  t.equal((await api('POST', '/webhooks', { url: receiver.url, events: ['pet.created'] })).status, 201);
  t.equal(
    (
      await api(
        'POST',
        '/pets',
        { name: 'Rex', categoryId: 1 },
        { traceparent: `00-${'1'.repeat(32)}-${'2'.repeat(16)}-01` },
      )
    ).status,
    201,
  );
  await receiver.waitFor(1);
  t.equal(receiver.received[0]?.headers.traceparent, undefined);
});

t.test('the default protocol is OTLP/HTTP with protobuf', async (t) => {
  const collector = await startCollector(t);
  const { api } = await tracedServer(t, collector.endpoint, { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: '' });
  t.equal((await api('GET', '/pets')).status, 200);
  const exported = await collector.waitFor(() => collector.exports[0]);
  t.equal(exported.path, '/v1/traces');
  t.equal(exported.headers['content-type'], 'application/x-protobuf');
});
