import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Contract } from '../../src/contract/document.js';
import { type Drift, files } from './drift.js';
import { operationObject } from './tools.js';

/** What `npm run contract:check` says when it runs without PETSTORE_RESPONSE_LOG, as only npm test sets it. */
export const RESPONSES_NOT_CHECKED =
  'contract:check: responses seen by tests: not checked (no PETSTORE_RESPONSE_LOG); run npm test, which runs it after the suite';

/** A documented response no test reaches, accepted for the reason given. */
export interface UnreachedResponse {
  operationId: string;
  status: string;
  reason: string;
}

interface DocumentedResponse {
  operationId: string;
  method: string;
  path: string;
  status: string;
}

function documentedResponses(contract: Contract): DocumentedResponse[] {
  return contract.operations.flatMap((operation) => {
    const { operationId, method, path } = operation;
    const responses = operationObject(contract, operation)?.responses ?? {};
    return Object.keys(responses).map((status) => ({ operationId, method, path, status }));
  });
}

interface SeenResponse {
  /** The base path of the version that answered (`/v1`); undefined on a line that does not say. */
  basePath: string | undefined;
  method: string;
  path: string;
  status: string;
  /** The Error body's code, for a failure that had one. */
  code: string | undefined;
}

/**
 * The lines the test helpers log (`/v1 GET /pets/{petId} 404 not_found`: the version's base path,
 * which a line may leave out, then the operation, status and code), split into fields.
 */
function parseLog(text: string): SeenResponse[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const fields = line.trim().split(' ');
      const basePath = fields[0]?.startsWith('/') === true ? fields.shift() : undefined;
      const [method = '', path = '', status = '', code] = fields;
      return { basePath, method, path, status, code };
    });
}

/**
 * Whether a test saw this response. A 405 belongs to the path rather than to one operation (it
 * answers the methods the path does not declare), so any 405 on the path reaches it; `4XX`
 * ranges and `default` are reached by any status they cover.
 */
function isReached(response: DocumentedResponse, seen: SeenResponse[], documented: Set<string>): boolean {
  return seen.some(({ method, path, status }) => {
    if (path !== response.path) return false;
    if (response.status === '405' && status === '405') return true;
    if (method !== response.method) return false;
    if (/^[1-5]XX$/i.test(response.status)) return status.startsWith(response.status.charAt(0));
    if (response.status === 'default') return !documented.has(`${response.operationId} ${status}`);
    return status === response.status;
  });
}

/**
 * The codes the contract lets a seen answer carry: those its operation's `x-error-codes` lists for
 * the status (or the range or `default` covering it). A 405 belongs to the path, so on a method the
 * path does not declare, those its operations list for 405. Undefined when nothing lists codes.
 */
function listedCodes(contract: Contract, { method, path, status }: SeenResponse): readonly string[] | undefined {
  const operation = contract.operations.find((candidate) => candidate.method === method && candidate.path === path);
  if (operation === undefined) {
    if (status !== '405') return undefined;
    const onPath = contract.operations.filter((candidate) => candidate.path === path);
    return onPath.flatMap(({ errorCodes }) => errorCodes?.['405'] ?? []);
  }
  const codes = operation.errorCodes;
  return codes?.[status] ?? codes?.[`${status.charAt(0)}XX`] ?? codes?.default;
}

/** Every Error code a test saw is one the contract lists for its operation and status. */
function unlistedCodes(contract: Contract, seen: SeenResponse[]): Drift[] {
  const drifts = new Map<string, Drift>();
  for (const response of seen) {
    const { method, path, status, code } = response;
    const listed = listedCodes(contract, response);
    if (code === undefined || listed === undefined || listed.includes(code)) continue;
    drifts.set(`${method} ${path} ${status} ${code}`, {
      what: `${method} ${path} answered ${status} with code ${code}, which its x-error-codes do not list for ${status}`,
      where: `${files.contract}: ${method} ${path} x-error-codes`,
      fix: { edit: `add ${code} to x-error-codes '${status}' if the server may answer it so, or correct the server` },
    });
  }
  return [...drifts.values()];
}

export function loadUnreachedResponses(root: string): UnreachedResponse[] {
  const file = join(root, files.unreachedResponses);
  if (!existsSync(file)) return [];
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as { exceptions?: unknown };
  const exceptions = parsed.exceptions;
  const valid = (entry: unknown): entry is UnreachedResponse => {
    const { operationId, status, reason } = (entry ?? {}) as Record<string, unknown>;
    return (
      typeof operationId === 'string' &&
      typeof status === 'string' &&
      typeof reason === 'string' &&
      reason.trim() !== ''
    );
  };
  if (!Array.isArray(exceptions) || !exceptions.every(valid)) {
    throw new Error(`${files.unreachedResponses}: "exceptions" must be a list of {operationId, status, reason}`);
  }
  return exceptions;
}

/**
 * Every response the contract documents is seen by a test of its version (as logged by
 * test/helpers/contract.ts when PETSTORE_RESPONSE_LOG is set) or accepted, with a reason, in contracts/unreached-responses.json;
 * every accepted one is still documented and still unreached; and every Error code seen is one the
 * operation's `x-error-codes` lists for its status.
 */
export function checkResponses(contract: Contract, log: string | undefined, unreached: UnreachedResponse[]): Drift[] {
  if (log === undefined) {
    return [
      {
        what: 'no record of the responses the tests saw',
        where: 'PETSTORE_RESPONSE_LOG names no file',
        fix: { run: 'npm test' },
      },
    ];
  }
  // What the version of this contract answered (a line that names no version counts for any).
  const seen = parseLog(log).filter(({ basePath }) => basePath === undefined || basePath === contract.basePath);
  const responses = documentedResponses(contract);
  const documented = new Set(responses.map(({ operationId, status }) => `${operationId} ${status}`));
  const accepted = new Map(unreached.map((entry) => [`${entry.operationId} ${entry.status}`, entry]));
  const drifts: Drift[] = [];
  for (const response of responses) {
    const key = `${response.operationId} ${response.status}`;
    const reached = isReached(response, seen, documented);
    const where = `${files.contract}: ${response.method} ${response.path} responses/${response.status}`;
    if (!reached && !accepted.has(key)) {
      drifts.push({
        what: `no test sees response ${response.status} of ${response.operationId}`,
        where,
        fix: { edit: `add a test that gets it, or list it with the reason in ${files.unreachedResponses}` },
      });
    } else if (reached && accepted.has(key)) {
      drifts.push({
        what: `response ${response.status} of ${response.operationId} is listed as unreached, but a test sees it`,
        where: files.unreachedResponses,
        fix: { edit: `remove its entry from ${files.unreachedResponses}` },
      });
    }
  }
  for (const [key, entry] of accepted) {
    if (documented.has(key)) continue;
    drifts.push({
      what: `response ${entry.status} of ${entry.operationId} is listed as unreached, but the contract does not document it`,
      where: files.unreachedResponses,
      fix: { edit: `remove its entry from ${files.unreachedResponses}` },
    });
  }
  return [...drifts, ...unlistedCodes(contract, seen)];
}

/**
 * The responses of every version served, each held to its own contract: an entry of
 * contracts/unreached-responses.json counts for the versions that document it (an operation one
 * version has and another has not, say), and must be documented by at least one.
 */
export function checkServedResponses(
  served: readonly Contract[],
  log: string | undefined,
  unreached: UnreachedResponse[],
): Drift[] {
  const keyOf = ({ operationId, status }: { operationId: string; status: string }) => `${operationId} ${status}`;
  const documentedBy = served.map((contract) => new Set(documentedResponses(contract).map(keyOf)));
  const drifts = served.flatMap((contract, index) =>
    checkResponses(
      contract,
      log,
      unreached.filter((entry) => documentedBy[index]?.has(keyOf(entry)) === true),
    ),
  );
  for (const entry of unreached) {
    if (documentedBy.some((documented) => documented.has(keyOf(entry)))) continue;
    drifts.push({
      what: `response ${entry.status} of ${entry.operationId} is listed as unreached, but no served contract documents it`,
      where: files.unreachedResponses,
      fix: { edit: `remove its entry from ${files.unreachedResponses}` },
    });
  }
  return drifts;
}
