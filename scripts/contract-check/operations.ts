/** What each operation must declare besides its handler: its scope, and a deprecation's dates. */
import { type Contract, eventsWithoutScope, incompleteDeprecations, scopesOf } from '../../src/contract/document.js';
import { type Drift, files } from './drift.js';

/** Every deprecated operation says when it was deprecated, when it goes and what replaces it. */
export function checkDeprecations(contract: Contract): Drift[] {
  return incompleteDeprecations(contract.operations).map((what) => ({
    what,
    where: files.contract,
    fix: { edit: 'add the extensions to the operation (docs/contract.md: "Deprecating an operation")' },
  }));
}

/**
 * Every secured operation names a scope in its security requirement, and only scopes a key can be
 * given (the security scheme's `x-scopes`): the server enforces exactly what the contract says.
 */
export function checkScopes(contract: Contract): Drift[] {
  const known = scopesOf(contract.dereferenced);
  return contract.operations.flatMap(({ operationId, method, path, securitySchemes, scopes }): Drift[] => {
    const where = `${files.contract}: ${method} ${path}`;
    if (securitySchemes.length > 0 && scopes.length === 0) {
      return [
        {
          what: `operation ${operationId} names no scope`,
          where,
          fix: { edit: `give it security: [{apiKey: [<scope>]}] with one of ${[...known.keys()].join(', ')}` },
        },
      ];
    }
    return scopes
      .filter((scope) => !known.has(scope))
      .map((scope) => ({
        what: `operation ${operationId} names the scope ${scope}, which no key can be given`,
        where,
        fix: { edit: "name a scope of the security scheme's x-scopes, or add it there" },
      }));
  });
}

/** Every event kind names the scope that reads its data (`x-scope`): subscribing to it needs that scope. */
export function checkEventScopes(contract: Contract): Drift[] {
  return eventsWithoutScope(contract.dereferenced).map((what) => ({
    what,
    where: files.contract,
    fix: { edit: 'add x-scope to the event\'s post operation under webhooks (docs/events.md: "Subscribing")' },
  }));
}
