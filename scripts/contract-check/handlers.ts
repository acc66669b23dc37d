import type { Contract } from '../../src/contract/document.js';
import { serviceHandlers } from '../../src/handlers/index.js';
import type { Storage } from '../../src/storage/types.js';
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

/** Every operation of the contract has a handler, and every handler an operation. */
export function checkHandlers(contract: Contract, handlers: string[] = handlerNames(contract)): Drift[] {
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
  return drifts;
}
