import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { buildApp } from '../../src/app.js';
import { API_VERSIONS } from '../../src/versions/index.js';
import type { FastifyInstance } from 'fastify';
import type { Contract } from '../../src/contract/document.js';
import { DEFAULT_OVERLOAD } from '../../src/plugins/overload.js';
import { openSqlite } from '../../src/storage/sqlite/index.js';
import { type Drift, files } from './drift.js';
import { firstMismatch } from './tools.js';

/** The public URL the app is built with: what the served servers[0] names. */
const INSTANCE_URL = 'http://contract-check.invalid';
const FIX = {
  edit: `serve ${files.contract} as committed, with only this instance added first to servers (src/plugins/docs.ts)`,
};

const representations = [
  { name: 'openapi.json', parse: (text: string): unknown => JSON.parse(text) },
  { name: 'openapi.yaml', parse: (text: string): unknown => parse(text) },
];

/**
 * What the app serves at {basePath}/openapi.json and .yaml, for each version, is that version's
 * committed file (openapi.yaml for the newest, its release in contracts/ for an older one), except
 * that servers[0] names the running instance and the committed servers follow it.
 */
export async function checkServed(root: string, contract: Contract, olderContracts: Contract[] = []): Promise<Drift[]> {
  const storage = openSqlite({ filename: ':memory:' });
  // What is served is checked, not load: no shedding for the lag of a busy machine (a 503 here).
  const app = await buildApp({
    contract,
    olderContracts,
    apiVersions: API_VERSIONS,
    storage,
    logger: false,
    publicUrl: INSTANCE_URL,
    overload: { ...DEFAULT_OVERLOAD, maxEventLoopDelayMs: 0 },
  });
  try {
    const versions = [
      { served: contract, file: files.contract },
      ...olderContracts.map((older) => ({
        served: older,
        file: `${files.releases}/v${older.document.info.version}.yaml`,
      })),
    ];
    const drifts: Drift[] = [];
    for (const { served, file } of versions) drifts.push(...(await checkDocuments(app, root, served, file)));
    return drifts;
  } finally {
    await app.close();
    await storage.close();
  }
}

async function checkDocuments(app: FastifyInstance, root: string, contract: Contract, file: string): Promise<Drift[]> {
  const committed = parse(readFileSync(join(root, file), 'utf8')) as { servers?: unknown[] };
  const drifts: Drift[] = [];
  for (const representation of representations) {
    const url = `${contract.basePath}/${representation.name}`;
    const response = await app.inject({ method: 'GET', url });
    if (response.statusCode !== 200) {
      drifts.push({ what: `GET ${url} answers ${response.statusCode}`, where: url, fix: FIX });
      continue;
    }
    const served = representation.parse(response.body) as { servers?: unknown[] };
    const [instance, ...servers] = served.servers ?? [];
    const namesInstance = (instance as { url?: unknown } | undefined)?.url === `${INSTANCE_URL}${contract.basePath}`;
    const mismatch = namesInstance ? firstMismatch({ ...served, servers }, committed) : '/servers/0';
    if (mismatch !== undefined) {
      drifts.push({ what: `GET ${url} is not the committed ${file}`, where: `${url} at ${mismatch}`, fix: FIX });
    }
  }
  return drifts;
}
