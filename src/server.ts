import { ensureDevelopmentKey } from './accounts.js';
import { buildApp } from './app.js';
import { loadConfig } from './config.js';
import { loadContract } from './contract.js';
import { describeDatabase, openStorage } from './storage/index.js';

/** Starts the API: `npm start`. Configuration comes from the environment (see README). */
async function main(): Promise<void> {
  const config = loadConfig();
  const contract = await loadContract();
  let onIdleError: (error: Error) => void = () => undefined;
  const storage = await openStorage(config.database, { onIdleError: (error) => onIdleError(error) });
  const app = await buildApp({
    contract,
    storage,
    logger: { level: config.logLevel, redact: ['req.headers.authorization', 'headers.authorization'] },
    publicUrl: config.publicUrl,
    rateLimit: config.rateLimit,
    connections: config.connections,
  });
  onIdleError = (error) => app.log.warn({ err: error }, 'an idle database connection failed');

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    await app.close();
    await storage.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));

  await app.listen({ host: config.host, port: config.port });
  // Only once listening: a key issued by a start that then fails (port taken) is never shown.
  const issued = await ensureDevelopmentKey(storage.accounts);
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : config.port;
  const origin = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;

  const api = `${origin}${contract.basePath}`;
  const lines = [
    `Pet Store API at ${api} (database: ${describeDatabase(config.database)})`,
    `  docs: ${origin}/docs`,
    `  contract: ${api}/openapi.json, ${api}/openapi.yaml`,
  ];
  if (issued === undefined) {
    // Keys are stored as hashes, so an existing one cannot be shown again: say how to make one.
    const database = config.database.engine === 'sqlite' ? `'${config.database.file}'` : '<this DATABASE_URL>';
    lines.push(`  a new key: DATABASE_URL=${database} npx petstore keys create <account>`);
  } else {
    lines.push(
      'No API keys existed, so a development account and key were created. The key is shown once:',
      `  curl -H 'Authorization: Bearer ${issued.key}' ${origin}${contract.basePath}/pets`,
      issued.key,
    );
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`petstore failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
