import closeWithGrace from 'close-with-grace';
import pino from 'pino';
import { ensureDevelopmentKey } from './auth/development-account.js';
import { buildApp } from './app.js';
import { loadConfig } from './config/environment.js';
import { Dispatcher } from './events/dispatcher.js';
import { VersionChain } from './versions/chain.js';
import { API_VERSIONS } from './versions/index.js';
import { servedContracts } from './versions/served.js';
import { redisClient, redisLocation } from './plugins/rate-limit/redis.js';
import { Metrics } from './metrics/registry.js';
import { type MetricsServer, startMetricsServer } from './metrics/server.js';
import { instrumentStorage } from './metrics/storage-timing.js';
import type { DatabaseConfig, OpenOptions, openStorage } from './storage/index.js';
import { readTls } from './config/tls.js';
import { tracingConfigured } from './tracing/configured.js';

/** The database, or a start that stops naming DATABASE_URL when its SQLite file cannot be opened. */
async function openDatabase(open: typeof openStorage, database: DatabaseConfig, options: OpenOptions) {
  try {
    return await open(database, options);
  } catch (error) {
    if (database.engine !== 'sqlite') throw error;
    throw new Error(
      `DATABASE_URL names the SQLite file ${database.file}, which cannot be opened (${(error as Error).message}); set DATABASE_URL to a file in a directory this process can create and write`,
      { cause: error },
    );
  }
}

/**
 * Standard output for the log: pino's destination gathers lines until it holds 4 KiB (minLength),
 * or for 100 ms (periodicFlush), and writes them asynchronously: one write a line made the write,
 * its thread-pool round trip and its callback a share of a request's CPU. pino writes what is held
 * when the process exits (or logs at fatal level); a SIGKILL loses at most 100 ms of lines.
 */
function logDestination() {
  return pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: 100 });
}

/**
 * Starts the API: `npm start`, and under `npm run dev` (scripts/dev.ts, which sets PETSTORE_DEV=1).
 * Configuration comes from the environment (docs/configuration.md).
 */
async function main(): Promise<void> {
  const config = loadConfig();
  // openapi.yaml, and the release of each older version served beside it (docs/versions.md).
  const { contract, olderContracts } = await servedContracts();
  const https = config.tls && readTls(config.tls);
  const tracing = tracingConfigured() ? (await import('./tracing/opentelemetry.js')).startTracing() : undefined;
  // Loaded only now, once tracing has started: the pg instrumentation patches `pg` as it is loaded.
  const { describeDatabase, openStorage } = await import('./storage/index.js');
  // Until the app's logger exists, a database connection's failure is kept, then logged like later ones.
  const early: { error: Error; channel?: string }[] = [];
  let onIdleError = (error: Error): void => void early.push({ error });
  let onListenError = (error: Error, channel: string): void => void early.push({ error, channel });
  const storage = await openDatabase(openStorage, config.database, {
    onIdleError: (error) => onIdleError(error),
    onListenError: (error, channel) => onListenError(error, channel),
    ...(tracing && { traceParent: tracing.traceParent }),
  });
  const traced = tracing === undefined ? storage : tracing.storage(storage, config.database.engine);
  const redis = config.redisUrl === undefined ? undefined : await redisClient(config.redisUrl);
  const metrics = config.metrics && new Metrics();
  const served = metrics === undefined ? traced : instrumentStorage(traced, metrics);
  const app = await buildApp({
    contract,
    olderContracts,
    apiVersions: API_VERSIONS,
    storage: served,
    metrics,
    logger: {
      level: config.logLevel,
      redact: ['req.headers.authorization', 'headers.authorization'],
      stream: logDestination(),
    },
    publicUrl: config.publicUrl,
    rateLimit: config.rateLimit,
    redis,
    connections: config.connections,
    development: process.env.PETSTORE_DEV === '1',
    overload: config.overload,
    trustProxy: config.trustProxy,
    https,
    webhooks: config.webhooks,
    tracing,
  });
  // The delivery worker (docs/architecture.md): the process's, beside the app, started once it listens.
  const deliveries = new Dispatcher(
    served.deliveries,
    config.webhooks,
    new VersionChain(API_VERSIONS),
    metrics?.deliveries,
    (error) => app.log.error({ err: error }, 'webhook delivery failed'),
    tracing?.deliveries,
  );
  onIdleError = (error) => app.log.warn({ err: error }, 'an idle database connection failed');
  onListenError = (error, channel) =>
    app.log.warn(
      { err: error, channel },
      "a LISTEN connection failed; retried every second (meanwhile keys are read from the database and other instances' events found by polling)",
    );
  for (const { error, channel } of early.splice(0)) {
    if (channel === undefined) onIdleError(error);
    else onListenError(error, channel);
  }

  let metricsServer: MetricsServer | undefined;
  // On SIGTERM or SIGINT (a second one exits at once), or an error nothing caught: drain, close,
  // exit; past the delay and SHUTDOWN_TIMEOUT_MS the process exits 1 whatever is still open.
  closeWithGrace(
    {
      delay: config.shutdownDelayMs + config.shutdownTimeoutMs,
      logger: { error: (message: unknown) => app.log.error(message) },
      onTimeout: () =>
        app.log.error(
          { timeoutMs: config.shutdownTimeoutMs },
          'requests were still open past SHUTDOWN_TIMEOUT_MS: exiting without them',
        ),
    },
    async ({ signal, err }) => {
      if (err !== undefined) app.log.fatal({ err }, 'an error nothing caught: shutting down');
      app.log.info({ signal, delayMs: config.shutdownDelayMs }, 'shutting down');
      // Behind a balancer: not ready, still serving, until its health checks have taken this
      // instance out; only then is the listener closed (docs/deploy.md).
      app.stopBeingReady();
      await new Promise((resolve) => setTimeout(resolve, config.shutdownDelayMs));
      const stoppingAt = Date.now();
      await app.close();
      // Attempts in flight finish (a few seconds at most) or are given back for another instance.
      await deliveries.stop();
      await metricsServer?.close();
      // The spans still buffered are sent, within the exporter's timeout (OTEL_EXPORTER_OTLP_TIMEOUT).
      await tracing
        ?.shutdown()
        .catch((error: unknown) => app.log.warn({ err: error }, 'spans not exported at shutdown'));
      redis?.disconnect();
      await storage.close();
      // The last line: a supervisor or an operator may start it again now.
      app.log.info({ signal, drainedMs: Date.now() - stoppingAt }, 'stopped: requests finished, database closed');
    },
  );

  await app.listen({ host: config.host, port: config.port });
  deliveries.start();
  if (metrics !== undefined && config.metrics !== undefined) {
    const { host, port } = config.metrics;
    metricsServer = await startMetricsServer(metrics.registry, host, port).catch((error: unknown) => {
      throw new Error(
        `metrics listener on ${host}:${port} (METRICS_HOST, METRICS_PORT; off with METRICS_PORT=off): ${String(error)}`,
      );
    });
  }
  // Only once listening: a key issued by a start that then fails (port taken) is never shown.
  const issued = await ensureDevelopmentKey(storage.accounts);
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : config.port;
  const origin = `${https === undefined ? 'http' : 'https'}://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;

  const api = `${origin}${contract.basePath}`;
  const lines = [
    `Pet Store API at ${api} (database: ${describeDatabase(config.database)})`,
    // Each older version beside it, answered through the changes made since (docs/versions.md).
    ...olderContracts.map(
      ({ basePath, document }) => `  ${basePath.slice(1)}: ${origin}${basePath} (${document.info.version})`,
    ),
    `  docs: ${origin}/docs`,
    `  contract: ${api}/openapi.json, ${api}/openapi.yaml`,
    redis === undefined
      ? '  rate limits: counted by this instance alone; set REDIS_URL to share them across instances'
      : `  rate limits: shared through Redis at ${redisLocation(redis)}`,
    `  metrics: ${metricsServer?.url ?? 'off (METRICS_PORT=off)'}`,
    `  traces: ${tracing === undefined ? 'off (set OTEL_EXPORTER_OTLP_ENDPOINT to export them)' : 'exported over OTLP/HTTP (OTEL_EXPORTER_OTLP_*)'}`,
  ];
  if (issued === undefined) {
    // Keys are stored as hashes, so an existing one cannot be shown again: say how to make one.
    const database = config.database.engine === 'sqlite' ? `'${config.database.file}'` : '<this DATABASE_URL>';
    lines.push(`  a new key: DATABASE_URL=${database} npx petstore keys create <account>`);
  } else {
    lines.push(
      'No API keys existed, so a development account and key were created. The key is shown once:',
      // PUBLIC_URL is where clients reach the instances (behind a balancer, the balancer).
      `  curl ${config.publicUrlCa === undefined ? '' : `--cacert '${config.publicUrlCa}' `}-H 'Authorization: Bearer ${issued.key}' ${config.publicUrl === undefined ? origin : new URL(config.publicUrl).origin}${contract.basePath}/pets`,
      issued.key,
    );
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`petstore failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
