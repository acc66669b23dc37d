import { join } from 'node:path';
import { type Contract, loadContract } from '../contract/document.js';
import { contractPath, projectRoot } from '../contract/paths.js';
import type { ApiVersion } from './change.js';
import { API_VERSIONS } from './index.js';
import { newestRelease, parseVersion } from './releases.js';

export interface ServedContracts {
  /** openapi.yaml: the newest version, which the handlers are written against. */
  contract: Contract;
  /** The newest release of each older version declared, newest first. */
  olderContracts: Contract[];
}

/**
 * The contract of every version the server answers: openapi.yaml for the newest, and for each older
 * major version `versions` declares, its newest release in contracts/ (kept as it was promised).
 */
export async function servedContracts(
  root: string = projectRoot,
  versions: readonly ApiVersion[] = API_VERSIONS,
): Promise<ServedContracts> {
  const contract = await loadContract(root === projectRoot ? contractPath : join(root, 'openapi.yaml'));
  const major = parseVersion(contract.document.info.version)?.[0];
  const declared = versions.map((version) => version.major);
  if (major === undefined || declared.at(-1) !== major) {
    throw new Error(
      `openapi.yaml is version ${contract.document.info.version}, but src/versions/index.ts declares versions ${declared.join(', ')} (docs/versions.md)`,
    );
  }
  const olderContracts = await Promise.all(
    declared
      .slice(0, -1)
      .reverse()
      .map((older) => {
        const release = newestRelease(root, older);
        if (release === undefined) throw new Error(`version ${older} is declared but has no release in contracts/`);
        return loadContract(join(root, release.file));
      }),
  );
  return { contract, olderContracts };
}
