import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { OpenAPIV3_1 } from 'openapi-types';
import { type Contract, loadContract } from '../../src/contract.js';
import { type Drift, files } from './drift.js';
import { operationObject, parseReport, redocly } from './tools.js';

type Version = [major: number, minor: number, patch: number];

export interface Release {
  version: Version;
  /** Relative to the project root, e.g. `contracts/v1.0.0.yaml`. */
  file: string;
}

interface DiffReport {
  reportVersion: string;
  changes: {
    path: string;
    verdicts: {
      ruleId: string;
      impact: 'major' | 'minor' | 'patch';
      message: string;
      location?: { file: string; line: number; col: number };
    }[];
  }[];
}

const FIX = {
  edit: 'undo the change, or release it as a new major version (docs/contract.md: "Changing the contract")',
};
const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

export function parseVersion(text: string): Version | undefined {
  const match = /^(\d+)\.(\d+)\.(\d+)$/.exec(text);
  return match === null ? undefined : [Number(match[1]), Number(match[2]), Number(match[3])];
}

/** The newest `contracts/vX.Y.Z.yaml` of this major version, if any was released. */
export function newestRelease(root: string, major: number): Release | undefined {
  const releases = readdirSync(join(root, files.releases)).flatMap((name) => {
    const version = parseVersion(/^v(.+)\.yaml$/.exec(name)?.[1] ?? '');
    return version?.[0] !== major ? [] : [{ version, file: `${files.releases}/${name}` }];
  });
  releases.sort((a, b) => a.version[1] - b.version[1] || a.version[2] - b.version[2]);
  return releases.at(-1);
}

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

/**
 * openapi.yaml breaks no client of the newest release of its major version: `redocly diff` rates
 * every change (direction-aware: a request may accept more and a response promise more, never
 * the reverse) and each change it rates major is a failure, as is any change of authentication.
 */
export async function checkBreaking(root: string, current: Contract): Promise<Drift[]> {
  const version = parseVersion(current.document.info.version);
  if (version === undefined) {
    return [{ what: `info.version "${current.document.info.version}" is not X.Y.Z`, where: files.contract, fix: FIX }];
  }
  const release = newestRelease(root, version[0]);
  if (release === undefined) return []; // a new major version: nothing released to break yet
  const label = `v${release.version.join('.')} (${release.file})`;
  // security-requirement-changed is replaced by securityChanges(), which also sees removals.
  const args = [
    'diff',
    release.file,
    files.contract,
    '--format=json',
    '--fail-on=none',
    '--skip-rule=security-requirement-changed',
  ];
  const report = parseReport('redocly diff', await redocly(root, args)) as DiffReport;
  if (report.reportVersion !== '1') throw new Error(`redocly diff: unknown report version ${report.reportVersion}`);
  const drifts = report.changes.flatMap(({ path, verdicts }) =>
    verdicts
      .filter(({ impact }) => impact === 'major')
      .map(({ ruleId, message, location }): Drift => {
        const at = location === undefined ? '' : `, ${location.file}:${location.line}:${location.col}`;
        return {
          what: `breaking change against ${label}: ${message} [${ruleId}]`,
          where: `${describePointer(path)}${at}`,
          fix: FIX,
        };
      }),
  );
  return [...drifts, ...securityChanges(await loadContract(join(root, release.file)), current, label)];
}
