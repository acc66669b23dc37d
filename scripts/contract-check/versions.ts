import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { loadContract } from '../../src/contract/document.js';
import type { ApiVersion, Covered, VersionChange } from '../../src/versions/change.js';
import { API_VERSIONS } from '../../src/versions/index.js';
import { describePointer, newestRelease, parseVersion, ratedChanges, securityChanges } from './breaking.js';
import { type Drift, files } from './drift.js';
import { versionTag } from './release.js';

const REGISTRY = 'src/versions/index.ts';
const FIX = {
  edit: `declare a version change that covers it (src/versions/changes/, listed in ${REGISTRY}; docs/versions.md), or undo it`,
};

/** One difference between two versions' contracts, where the breaking-change check names it. */
interface Difference {
  at: string;
  rule: string | undefined;
  breaking: boolean;
  what: string;
  location: string;
}

/** `at` names this place or one that holds it: `GET /pets/{petId}` holds `GET /pets/{petId} responses/200`. */
function holds(at: string, place: string): boolean {
  return place === at || place.startsWith(`${at} `) || place.startsWith(`${at}/`);
}

const coversDifference = (covered: Covered, difference: Difference) =>
  holds(covered.at, difference.at) && (covered.rule === undefined || covered.rule === difference.rule);

/** Every difference from `base` to `revision` (files relative to the root), breaking or not. */
async function differences(root: string, base: string, revision: string, label: string): Promise<Difference[]> {
  const rated = await ratedChanges(root, base, revision, label);
  const [older, newer] = await Promise.all([loadContract(join(root, base)), loadContract(join(root, revision))]);
  // Each major version is served under its own base path (/v1, /v2): that its servers differ is
  // what being a version means, not a difference a change could migrate.
  const ofTheVersion = rated.filter(({ path }) => !describePointer(path).startsWith('#/servers'));
  return [
    ...ofTheVersion.map(({ path, ruleId, impact, allowed, message, kind, location }) => ({
      at: describePointer(path),
      rule: ruleId,
      breaking: impact === 'major' && allowed === undefined,
      what: `${message || kind} [${String(ruleId)}]`,
      location,
    })),
    ...securityChanges(older, newer, label).map(({ what, where }) => ({
      at: where,
      rule: 'security-changed',
      breaking: true,
      what: what.replace(/^breaking change against [^:]+: /, ''),
      location: where,
    })),
  ];
}

/** The major version openapi.yaml names. */
function currentMajor(root: string): number | undefined {
  const document = parse(readFileSync(join(root, files.contract), 'utf8')) as { info?: { version?: unknown } };
  return parseVersion(String(document.info?.version))?.[0];
}

/**
 * Every breaking difference between consecutive major versions' contracts (the newest release of the
 * older against openapi.yaml, or the newer's newest release) is covered by a change of the newer
 * version, and every change covers a difference there is: an older version is answered through
 * its changes, so one that the contracts do not show, or a difference no change migrates, would
 * serve a client something other than its contract.
 */
export async function checkVersionChanges(
  root: string,
  versions: readonly ApiVersion[] = API_VERSIONS,
): Promise<Drift[]> {
  const current = currentMajor(root);
  if (current === undefined) return []; // the breaking check names a version that is not X.Y.Z
  const declared = versions.map(({ major }) => major);
  if (declared.at(-1) !== current) {
    return [
      {
        what: `${files.contract} is version ${current}, but ${REGISTRY} declares versions ${declared.join(', ')}`,
        where: REGISTRY,
        fix: { edit: `list every major version up to ${current}, each with its changes, in ${REGISTRY}` },
      },
    ];
  }
  const drifts: Drift[] = [];
  for (const version of versions.slice(1)) {
    const older = newestRelease(root, version.major - 1);
    const newer = version.major === current ? files.contract : newestRelease(root, version.major)?.file;
    if (older === undefined || newer === undefined) {
      drifts.push({
        what: `version ${version.major} has no release of version ${version.major - 1} before it to be compared with`,
        where: REGISTRY,
        fix: { edit: `release version ${version.major - 1} first (docs/contract.md)` },
      });
      continue;
    }
    const span = `v${version.major - 1} (${older.file}) → v${version.major} (${newer})`;
    const found = await differences(root, older.file, newer, versionTag(older.version));
    const covers = version.changes.flatMap((change) => change.covers.map((covered) => ({ change, covered })));
    for (const difference of found.filter(({ breaking }) => breaking)) {
      if (covers.some(({ covered }) => coversDifference(covered, difference))) continue;
      drifts.push({
        what: `${span}: ${difference.what} is covered by no version change`,
        where: difference.location,
        fix: FIX,
      });
    }
    for (const { change, covered } of covers) {
      if (found.some((difference) => coversDifference(covered, difference))) continue;
      drifts.push({
        what: `${span}: the version change "${changeName(change)}" covers ${covered.at}${covered.rule === undefined ? '' : ` [${covered.rule}]`}, which does not differ`,
        where: REGISTRY,
        fix: { edit: 'correct what the change covers, or remove the change' },
      });
    }
  }
  return drifts;
}

const changeName = (change: VersionChange) => change.description.split(/[.:]/, 1)[0] ?? change.description;
