import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { OpenAPIV3_1 } from 'openapi-types';
import { type Contract, loadContract } from '../../src/contract/document.js';
import { newestRelease, parseVersion } from '../../src/versions/releases.js';
import { type Drift, files } from './drift.js';
import { operationObject, parseReport, redocly } from './tools.js';

export { newestRelease, parseVersion, type Release, releases, type Version } from '../../src/versions/releases.js';

interface DiffReport {
  reportVersion: string;
  changes: {
    path: string;
    kind: string;
    property?: string;
    impact: 'major' | 'minor' | 'patch';
    verdicts: {
      ruleId: string;
      impact: 'major' | 'minor' | 'patch';
      message: string;
      location?: { file: string; pointer: string; line: number; col: number };
    }[];
  }[];
}

const FIX = {
  edit: 'undo the change, or release it as a new major version (docs/contract.md: "Changing the contract")',
};
const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

/** `#/paths/~1pets~1{petId}/get/responses/200` -> `GET /pets/{petId} responses/200`. */
export function describePointer(pointer: string): string {
  const segments = pointer
    .replace(/^#\//, '')
    .split('/')
    .map((segment) => segment.replaceAll('~1', '/').replaceAll('~0', '~'));
  const [root, path, method, ...rest] = segments;
  if (root !== 'paths' || path === undefined) return pointer;
  if (method === undefined || !METHODS.has(method)) return [path, method, ...rest].filter(Boolean).join(' ');
  return [`${method.toUpperCase()} ${path}`, rest.join('/')].filter(Boolean).join(' ');
}

/** `apiKey`, `apiKey or none`, `none`: who may call, in words. */
function describeSecurity(requirements: OpenAPIV3_1.SecurityRequirementObject[]): string {
  const alternatives = requirements.map((requirement) => Object.keys(requirement).sort().join(' and ') || 'none');
  return alternatives.length === 0 ? 'none' : [...new Set(alternatives)].sort().join(' or ');
}

function securityByOperation(contract: Contract): Map<string, string> {
  return new Map(
    contract.operations.map((operation) => {
      const security = operationObject(contract, operation)?.security ?? contract.dereferenced.security ?? [];
      return [`${operation.method} ${operation.path}`, describeSecurity(security)];
    }),
  );
}

/**
 * Any change to who may call an operation, either way, is breaking: `redocly diff` rates a
 * removed requirement as a patch, so this compares each operation's effective security itself.
 */
export function securityChanges(released: Contract, current: Contract, label: string): Drift[] {
  const before = securityByOperation(released);
  const after = securityByOperation(current);
  return [...before].flatMap(([operation, was]) => {
    const now = after.get(operation);
    if (now === undefined || now === was) return [];
    return [
      {
        what: `breaking change against ${label}: authentication changed from ${was} to ${now}`,
        where: operation,
        fix: FIX,
      },
    ];
  });
}

/** A breaking change made on purpose, once, accepted with its reason (contracts/accepted-changes.json). */
export interface AcceptedChange {
  /** The release it breaks, e.g. `v1.0.0`. */
  against: string;
  rule: string;
  /** The JSON pointer of the changed schema in the newer contract. */
  at: string;
  reason: string;
}

export function loadAcceptedChanges(root: string): AcceptedChange[] {
  const file = join(root, files.acceptedChanges);
  return (JSON.parse(readFileSync(file, 'utf8')) as { changes: AcceptedChange[] }).changes;
}

/** One change `redocly diff` found, with its impact, and why a major one does not fail. */
export interface RatedChange {
  path: string;
  kind: string;
  property: string | undefined;
  impact: 'major' | 'minor' | 'patch';
  message: string;
  ruleId: string | undefined;
  /** Set for a major change that is allowed: to a beta operation, or accepted. */
  allowed?: string;
  location: string;
}

/** The stability of the operation a diff path is under, in the released contract. */
function stabilityAt(released: Contract, path: string): string {
  const match = /^#\/paths\/([^/]+)\/([a-z]+)/.exec(path);
  if (match === null) return 'stable';
  const template = (match[1] ?? '').replaceAll('~1', '/').replaceAll('~0', '~');
  const method = (match[2] ?? '').toUpperCase();
  return (
    released.operations.find((operation) => operation.path === template && operation.method === method)?.stability ??
    'stable'
  );
}

/**
 * Every change from `base` to `revision` (files relative to the root), rated by `redocly diff`
 * (direction-aware: a request may accept more and a response promise more, never the reverse).
 * A major change is allowed to an operation marked beta or experimental (`x-stability-level`) in
 * `base`, and where contracts/accepted-changes.json accepts it against `label`.
 */
export async function ratedChanges(
  root: string,
  base: string,
  revision: string,
  label: string,
): Promise<RatedChange[]> {
  // security-requirement-changed is replaced by securityChanges(), which also sees removals.
  const args = ['diff', base, revision, '--format=json', '--fail-on=none', '--skip-rule=security-requirement-changed'];
  const report = parseReport('redocly diff', await redocly(root, args)) as DiffReport;
  if (report.reportVersion !== '1') throw new Error(`redocly diff: unknown report version ${report.reportVersion}`);
  const released = await loadContract(join(root, base));
  const accepted = loadAcceptedChanges(root).filter((change) => change.against === label);
  return report.changes.flatMap(({ path, kind, property, impact, verdicts }) => {
    const rated = verdicts.length === 0 ? [{ ruleId: undefined, impact, message: '', location: undefined }] : verdicts;
    return rated.map(({ ruleId, impact: verdictImpact, message, location }): RatedChange => {
      const where = `${describePointer(path)}${location === undefined ? '' : `, ${location.file}:${location.line}:${location.col}`}`;
      const change: RatedChange = { path, kind, property, impact: verdictImpact, message, ruleId, location: where };
      if (verdictImpact !== 'major') return change;
      const stability = stabilityAt(released, path);
      if (stability !== 'stable') return { ...change, allowed: `the operation is ${stability} in ${label}` };
      const reason = accepted.find((entry) => entry.rule === ruleId && entry.at === location?.pointer)?.reason;
      return reason === undefined ? change : { ...change, allowed: `accepted: ${reason}` };
    });
  });
}

/**
 * openapi.yaml breaks no client of the newest release of its major version: each change
 * `redocly diff` rates major is a failure unless allowed (ratedChanges), as is any change of
 * authentication.
 */
export async function checkBreaking(root: string, current: Contract): Promise<Drift[]> {
  const version = parseVersion(current.document.info.version);
  if (version === undefined) {
    return [{ what: `info.version "${current.document.info.version}" is not X.Y.Z`, where: files.contract, fix: FIX }];
  }
  const release = newestRelease(root, version[0]);
  if (release === undefined) return []; // a new major version: nothing released to break yet
  const tag = `v${release.version.join('.')}`;
  const label = `${tag} (${release.file})`;
  const changes = await ratedChanges(root, release.file, files.contract, tag);
  const drifts = changes
    .filter(({ impact, allowed }) => impact === 'major' && allowed === undefined)
    .map(({ ruleId, message, location }): Drift => ({
      what: `breaking change against ${label}: ${message} [${String(ruleId)}]`,
      where: location,
      fix: FIX,
    }));
  return [...drifts, ...securityChanges(await loadContract(join(root, release.file)), current, label)];
}
