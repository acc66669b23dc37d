import type { FastifyReply } from 'fastify';
import {
  type Contract,
  type ContractOperation,
  eventsWithoutScope,
  incompleteDeprecations,
} from '../contract/document.js';
import type { ApiError } from '../domain/errors.js';
import { deprecationHeaders } from '../plugins/deprecation.js';
import { type ErrorMigration, unroutedErrors } from '../plugins/errors.js';
import { OlderVersion, servesUrl } from '../plugins/versioning.js';
import type { ApiVersion } from '../versions/change.js';
import { VersionChain } from '../versions/chain.js';
import { parseVersion } from '../versions/releases.js';

/** The versions one app serves, checked once, with what answering each of them takes. */
export interface ServedVersions {
  /** Every version served, newest first; each operation is its version's, however its operationId is shared. */
  all: readonly Contract[];
  chain: VersionChain;
  majorOf(version: Contract): number;
  /** The older versions answered through changes that migrate something; the others need no hook. */
  migrating: ReadonlyMap<Contract, OlderVersion>;
  /**
   * How an error no operation answers (404, 405, an unparsable request, /readyz's 503) is migrated
   * for a URL: none under the newest version's base path; under an older one's, as it gives it;
   * outside every base path (/healthz, /docs, an unknown path) or when the URL cannot be read, as
   * the oldest version gives it, as before v2 (docs/errors.md).
   */
  unroutedMigration: (url: string | undefined) => ErrorMigration | undefined;
  /** How those errors are sent. */
  sendUnrouted: (reply: FastifyReply, error: ApiError) => FastifyReply;
  /** The headers every answer of a deprecated operation carries, shed answers and refusals too. */
  deprecations: ReadonlyMap<ContractOperation, Record<string, string>>;
}

function majorOf({ document }: Contract): number {
  const major = parseVersion(document.info.version)?.[0];
  if (major === undefined) throw new Error(`a served contract's version is not semantic: ${document.info.version}`);
  return major;
}

/**
 * The newest contract and the older ones served beside it, refused at start when two share a base
 * path, one is unfit to serve, or the chain's newest version is not the newest contract's.
 */
export function servedVersions(
  contract: Contract,
  olderContracts: readonly Contract[],
  apiVersions: readonly ApiVersion[] | undefined,
): ServedVersions {
  const all = [contract, ...olderContracts];
  const basePaths = all.map(({ basePath }) => basePath);
  if (new Set(basePaths).size !== basePaths.length)
    throw new Error(`two versions share a base path: ${basePaths.join(', ')}`);
  const [unfit] = all.flatMap((version) => [
    ...incompleteDeprecations(version.operations),
    ...eventsWithoutScope(version.dereferenced),
  ]);
  if (unfit !== undefined) throw new Error(unfit);
  // By default each version served, with no changes.
  const chain = new VersionChain(
    apiVersions ?? all.map((version) => ({ major: majorOf(version), changes: [] })).reverse(),
  );
  if (chain.newest !== majorOf(contract)) {
    throw new Error(
      `the newest contract is version ${contract.document.info.version}, but the newest version declared is ${chain.newest}`,
    );
  }
  const migrating = new Map(
    olderContracts.flatMap((version) => {
      const older = new OlderVersion(majorOf(version), version.basePath, chain);
      return older.migratesRequests || older.migratesResponses ? [[version, older] as const] : [];
    }),
  );
  // Oldest first: the first is the one outside every version's base path.
  const unrouted = [...migrating.values()]
    .filter((older) => older.migratesResponses)
    .sort((one, other) => one.major - other.major)
    .map((older) => ({ older, migrate: older.errorAnswers('') }));
  const unroutedMigration = (url: string | undefined): ErrorMigration | undefined => {
    if (url !== undefined && servesUrl(contract.basePath, url)) return undefined;
    const under = url === undefined ? undefined : unrouted.find(({ older }) => older.serves(url));
    return (under ?? unrouted[0])?.migrate;
  };
  const sendUnrouted = unroutedErrors(unrouted.length === 0 ? undefined : unroutedMigration);
  const deprecations = new Map(
    all.flatMap((version) =>
      version.operations.flatMap((operation) => {
        const headers = deprecationHeaders(operation, version.operations, version.basePath);
        return headers === undefined ? [] : [[operation, headers] as const];
      }),
    ),
  );
  return { all, chain, majorOf, migrating, unroutedMigration, sendUnrouted, deprecations };
}
