import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import type { Contract } from '../../src/contract/document.js';
import { parseVersion, ratedChanges, type RatedChange, type Release, releases, type Version } from './breaking.js';
import { type Drift, files } from './drift.js';
import { firstMismatch } from './tools.js';

export const versionTag = (version: Version) => `v${version.join('.')}`;

const compare = (a: Version, b: Version) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

/** The release a version that is not released yet follows: the newest one below it. */
export function releaseBefore(root: string, version: Version): Release | undefined {
  return releases(root)
    .filter((release) => compare(release.version, version) < 0)
    .at(-1);
}

/** The changes openapi.yaml makes to the release before it, when its version is not released yet. */
export interface Unreleased {
  version: Version;
  /** undefined before the first release. */
  before: Release | undefined;
  changes: RatedChange[];
}

/** The `info.version` openapi.yaml names. */
function contractVersion(root: string): string {
  const document = parse(readFileSync(join(root, files.contract), 'utf8')) as { info?: { version?: unknown } };
  return String(document.info?.version);
}

/** openapi.yaml's changes not yet released, or undefined when its version is a release (or not X.Y.Z). */
export async function unreleasedChanges(root: string): Promise<Unreleased | undefined> {
  const version = parseVersion(contractVersion(root));
  if (version === undefined || existsSync(join(root, releaseFile(version)))) return undefined;
  const before = releaseBefore(root, version);
  const changes =
    before === undefined ? [] : await ratedChanges(root, before.file, files.contract, versionTag(before.version));
  return { version, before, changes };
}

export const releaseFile = (version: Version) => `${files.releases}/${versionTag(version)}.yaml`;

const FIX_RELEASED = {
  edit: `changes after a release carry the next version: set info.version to it; the changelog lists them under "Unreleased" (npm run changelog; docs/contract.md: "Which version a change carries")`,
};

/** The versions that may follow `release`: its next patch, minor and major. */
function successors([major, minor, patch]: Version): Version[] {
  return [
    [major, minor, patch + 1],
    [major, minor + 1, 0],
    [major + 1, 0, 0],
  ];
}

/** The smallest step the changes need: a major change in a new major version, an addition in a new minor. */
function neededStep(changes: RatedChange[]): 'major' | 'minor' | 'patch' {
  if (changes.some(({ impact, allowed }) => impact === 'major' && allowed === undefined)) return 'major';
  return changes.some(({ impact }) => impact !== 'patch') ? 'minor' : 'patch';
}

function stepOf(from: Version, to: Version): 'major' | 'minor' | 'patch' {
  if (to[0] !== from[0]) return 'major';
  return to[1] !== from[1] ? 'minor' : 'patch';
}

const STEPS = ['patch', 'minor', 'major'] as const;

/**
 * openapi.yaml's `info.version` says what it is: a version with a file in contracts/ is that
 * release, exactly; any other is the next version after the newest release below it (its next
 * patch, minor or major, as large a step as its changes need), listed under "Unreleased" in the
 * changelog until it ships.
 */
export async function checkRelease(root: string, contract: Contract): Promise<Drift[]> {
  const named = contract.document.info.version;
  const version = parseVersion(named);
  if (version === undefined) return []; // the breaking check names a version that is not X.Y.Z
  const file = releaseFile(version);
  if (existsSync(join(root, file))) {
    const released = parse(readFileSync(join(root, file), 'utf8')) as unknown;
    const current = parse(readFileSync(join(root, files.contract), 'utf8')) as unknown;
    const mismatch = firstMismatch(current, released);
    if (mismatch === undefined) return [];
    return [
      {
        what: `${files.contract} names version ${named}, released as ${file}, but is not that release`,
        where: `${files.contract} at ${mismatch}`,
        fix: FIX_RELEASED,
      },
    ];
  }
  const unreleased = await unreleasedChanges(root);
  const before = unreleased?.before;
  if (unreleased === undefined || before === undefined) return [];
  const tag = versionTag(before.version);
  const next = successors(before.version);
  if (!next.some((candidate) => compare(candidate, version) === 0)) {
    return [
      {
        what: `${files.contract} names version ${named}, which does not follow the newest release below it, ${tag}`,
        where: `${files.contract} info.version`,
        fix: { edit: `set info.version to one of ${next.map((candidate) => candidate.join('.')).join(', ')}` },
      },
    ];
  }
  const needed = neededStep(unreleased.changes);
  const step = stepOf(before.version, version);
  if (STEPS.indexOf(step) >= STEPS.indexOf(needed)) return [];
  const [suggested] = next.slice(STEPS.indexOf(needed));
  return [
    {
      what: `${files.contract} names version ${named}, a ${step} step from ${tag}, but its changes need a ${needed} step`,
      where: `${files.contract} info.version`,
      fix: {
        edit: `set info.version to ${(suggested ?? version).join('.')} (docs/contract.md: "Which version a change carries")`,
      },
    },
  ];
}
