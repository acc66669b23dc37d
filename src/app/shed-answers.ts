import type { IncomingMessage } from 'node:http';
import type { ContractOperation } from '../contract/document.js';
import type { PathTable } from '../contract/path-table.js';
import type { ApiError } from '../domain/errors.js';
import type { ErrorMigration } from '../plugins/errors.js';
import { type ShedAnswer, shedAnswer } from '../plugins/overload.js';
import type { ServedVersions } from './versions.js';

/**
 * A shed request's 503, prepared once per operation where it is not the overload error as it is:
 * every answer of a deprecated operation says so, a shed one too, and an older version's is in its
 * words. Shedding comes before fastify routes the request, so the operation is found from its URL.
 */
export function shedAnswers(
  versions: ServedVersions,
  paths: PathTable,
  overloaded: ApiError,
): (request: IncomingMessage) => ShedAnswer | undefined {
  const byOperation = new Map<ContractOperation, ShedAnswer>();
  for (const version of versions.all) {
    const older = versions.migrating.get(version);
    for (const operation of version.operations) {
      const extra = versions.deprecations.get(operation);
      if (extra === undefined && older?.migratesResponses !== true) continue;
      const answer = older?.migratesResponses ? older.errorAnswers(operation.operationId)(overloaded) : undefined;
      const prepared = answer ?? overloaded.prepared;
      byOperation.set(operation, shedAnswer(prepared, Object.entries(extra ?? {}).flat(), answer?.status));
    }
  }
  // Those of no operation, by the version of the URL (ServedVersions.unroutedMigration).
  const unrouted = new Map<ErrorMigration, ShedAnswer>();
  return (request) => {
    const url = request.url ?? '';
    const operation = paths.match(url)?.operations.get(request.method ?? '');
    if (operation !== undefined) return byOperation.get(operation);
    const migrate = versions.unroutedMigration(url);
    if (migrate === undefined) return undefined;
    let answer = unrouted.get(migrate);
    if (answer === undefined) {
      const migrated = migrate(overloaded);
      answer = shedAnswer(migrated, [], migrated.status);
      unrouted.set(migrate, answer);
    }
    return answer;
  };
}
