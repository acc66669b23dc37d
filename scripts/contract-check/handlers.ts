import type { Contract } from '../../src/contract/document.js';
import { serviceHandlers } from '../../src/handlers/index.js';
import type { Storage } from '../../src/storage/types.js';
import type { VersionChain } from '../../src/versions/chain.js';
import { parseVersion } from '../../src/versions/releases.js';
import { type Drift, files } from './drift.js';

/** Storage whose every method throws: building the service object must not touch storage. */
const untouchableStorage = new Proxy(
  {},
  {
    get: (_storage, repository) =>
      new Proxy(
        {},
        {
          get: (_repository, method) => () => {
            throw new Error(`storage.${String(repository)}.${String(method)}() was called while listing handlers`);
          },
        },
      ),
  },
) as Storage;

/** The operationIds the service object answers: exactly what fastify-openapi-glue resolves against. */
export function handlerNames(contract: Contract): string[] {
  return Object.keys(serviceHandlers(untouchableStorage, contract));
}

/** Older versions served, and the chain of changes that answers them with the newest version's handlers. */
export interface OlderServed {
  contracts: readonly Contract[];
  chain: VersionChain;
}

/**
 * Every operation of the contract has a handler, and every handler an operation; every operation of
 * an older version served is answered by a handler, its own or the one a version change names.
 */
export function checkHandlers(
  contract: Contract,
  handlers: string[] = handlerNames(contract),
  older?: OlderServed,
): Drift[] {
  const implemented = new Set(handlers);
  const operations = new Map(contract.operations.map((operation) => [operation.operationId, operation]));
  const drifts: Drift[] = [];
  for (const { operationId, method, path } of operations.values()) {
    if (implemented.has(operationId)) continue;
    drifts.push({
      what: `operation ${operationId} has no handler`,
      where: `${files.contract}: ${method} ${path}`,
      fix: { edit: `implement ${operationId} in src/handlers/ (npm run build names what is missing)` },
    });
  }
  for (const name of implemented) {
    if (operations.has(name)) continue;
    drifts.push({
      what: `handler ${name} answers no operation of the contract`,
      where: 'serviceHandlers() in src/handlers/index.ts',
      fix: { edit: `remove the handler, or add the operation ${name} to ${files.contract} and run npm run generate` },
    });
  }
  for (const olderContract of older?.contracts ?? []) {
    const major = parseVersion(olderContract.document.info.version)?.[0] ?? 0;
    for (const { operationId, method, path } of olderContract.operations) {
      const answering = older?.chain.answeringOperation(major, operationId) ?? operationId;
      if (implemented.has(answering)) continue;
      drifts.push({
        what: `operation ${operationId} of v${major} has no handler${answering === operationId ? '' : ` (answered by ${answering})`}`,
        where: `${olderContract.basePath}: ${method} ${path}`,
        fix: {
          edit: `name the operation of the newest version that answers it in a version change's answeredBy (src/versions/changes/; docs/versions.md)`,
        },
      });
    }
  }
  return drifts;
}
