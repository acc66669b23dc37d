import type { onRequestHookHandler } from 'fastify';
import type { ContractOperation } from '../contract/document.js';
import type { PathTable } from '../contract/path-table.js';
import { requireScopes } from '../plugins/auth.js';
import { markDeprecated } from '../plugins/deprecation.js';
import { refusals, type Refuse } from '../plugins/errors.js';
import { refuseUnimplementedTransferCoding } from '../plugins/framing.js';
import { emptyPathParameterIsUnroutable, type RequestHook } from '../plugins/not-found.js';
import type { ServedVersions } from './versions.js';

// The hooks that run on every request are synchronous: one that returns a promise costs a promise
// and a microtask per request (BENCHMARKS.md).

/** On every response: the request id, and no content sniffing. */
export const standardHeaders: onRequestHookHandler = (request, reply, done) => {
  reply.header('x-request-id', request.id).header('x-content-type-options', 'nosniff');
  done();
};

/** On API responses: they are per-key and change, so no cache may keep them. */
export const apiHeaders: onRequestHookHandler = (_request, reply, done) => {
  reply.header('cache-control', 'no-store');
  done();
};

/** Each operation's own onRequest hooks, chosen from its contract before any route is built. */
export interface OperationHooks {
  /** The hooks of an operation's route, in the order they run. */
  of(operation: ContractOperation): readonly RequestHook[];
}

/**
 * Security comes from the contract but runs as onRequest, before the body is parsed (the glue's own
 * securityHandlers would run as a preHandler, after validation): a path parameter that is empty,
 * the deprecation headers (every answer of a deprecated operation carries them, a refusal too), a
 * transfer coding this server does not take, the key, then the key's scopes.
 */
export function operationHooks(
  versions: ServedVersions,
  paths: PathTable,
  /** The authentication hook refusing through `refuse`. */
  authenticator: (refuse: Refuse) => onRequestHookHandler,
): OperationHooks {
  const refuse = refusals();
  const authenticate = authenticator(refuse);
  const refuseEmptyPathParameter = emptyPathParameterIsUnroutable(paths);
  const hooks = new Map<ContractOperation, readonly RequestHook[]>();
  for (const version of versions.all) {
    const older = versions.migrating.get(version);
    for (const operation of version.operations) {
      // An older version's refusals in its own words; the newest version's as they are.
      const migrate = older?.migratesResponses ? older.errorAnswers(operation.operationId) : undefined;
      const refuseHere = migrate === undefined ? refuse : refusals(migrate);
      const deprecation = versions.deprecations.get(operation);
      const onRequest: RequestHook[] = [];
      if (operation.path.includes('{')) onRequest.push(refuseEmptyPathParameter);
      if (deprecation !== undefined) onRequest.push(markDeprecated(deprecation));
      onRequest.push(refuseUnimplementedTransferCoding);
      if (operation.securitySchemes.length > 0) {
        onRequest.push(migrate === undefined ? authenticate : authenticator(refuseHere));
      }
      if (operation.scopes.length > 0) onRequest.push(requireScopes(operation.scopes, refuseHere));
      hooks.set(operation, onRequest);
    }
  }
  return { of: (operation) => hooks.get(operation) ?? [] };
}
