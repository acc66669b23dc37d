import { appendFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { Contract } from '../../src/contract/document.js';
import { PROBLEM_MEDIA_TYPE } from '../../src/contract/media-types.js';
import { type ObservedResponse, ResponseConformance } from '../../src/contract/response-conformance.js';
import { API_VERSIONS } from '../../src/versions/index.js';
import { servedContracts } from '../../src/versions/served.js';

export type { ObservedResponse };

/**
 * Every version the server answers, each with its contract (src/versions/served.ts): openapi.yaml
 * for the newest, the newest release for each older one. A response is checked against the
 * contract of the base path that answered it.
 */
const { contract: newest, olderContracts } = await servedContracts();

/** What startApi serves by default: what the server serves. */
export const servedVersions = { contract: newest, olderContracts, apiVersions: API_VERSIONS };

/**
 * The contract the v1 suites test: the one served under /v1 (openapi.yaml while it is v1, then the
 * last v1 release, contracts/v1.2.0.yaml).
 */
const contract: Contract = [newest, ...olderContracts].find(({ basePath }) => basePath === '/v1') ?? newest;

interface Version {
  contract: Contract;
  conformance: ResponseConformance;
  /** Its error body (v2's `Problem`, v1's `Error`) and that body's media type. */
  isErrorBody: ValidateFunction;
  errorMediaType: string;
  /** The codes this version sends: `Error.code` is an open string, `ErrorCode` lists them. */
  errorCodes: Set<string>;
}

const versions: Version[] = [newest, ...olderContracts].map((served) => {
  const { Problem, Error, ErrorCode } = served.dereferenced.components?.schemas ?? {};
  return {
    contract: served,
    conformance: new ResponseConformance(served),
    isErrorBody: new Ajv2020({ strict: false, validateSchema: false }).compile((Problem ?? Error) as object),
    errorMediaType: Problem === undefined ? 'application/json' : PROBLEM_MEDIA_TYPE,
    errorCodes: new Set((ErrorCode as { enum: string[] }).enum),
  };
});

/** The version a URL is answered by: the one whose base path it is under (the v1 suites' otherwise: /healthz, /docs). */
function versionOf(url: string): Version {
  const found = versions.find(({ contract: { basePath } }) => {
    if (!url.startsWith(basePath)) return false;
    const next = url.charAt(basePath.length);
    return next === '' || next === '/' || next === '?';
  });
  return found ?? versions.find((version) => version.contract === contract) ?? (versions[0] as Version);
}

/** The operation of the contract a URL's version answers it from, for a method and URL, if any. */
export const findOperation = (method: string, url: string) => versionOf(url).conformance.findOperation(method, url);

/**
 * Paths served outside the contract, by GET alone (decisions.md: the contract documents, the docs
 * page, /healthz and /readyz). The contract's checker takes every path it lacks for unknown, a 404
 * whatever the method; on these, another method is a 405 with `Allow: GET`, as on its own paths.
 */
const SERVED_OUTSIDE_CONTRACT = new Set([
  ...versions.flatMap(({ contract: { basePath } }) => [`${basePath}/openapi.json`, `${basePath}/openapi.yaml`]),
  '/docs',
  '/docs/',
  '/healthz',
  '/readyz',
]);

/** The answer outside the contract that its checker cannot know, if the request gets one. */
function outsideTheContract(method: string, url: string): { status: number; allow?: string } | undefined {
  // `CONNECT host:443`, `OPTIONS *`: no path, so no resource of this API.
  if (!url.startsWith('/')) return { status: 400 };
  const path = url.split('?', 1)[0] ?? '';
  return method !== 'GET' && SERVED_OUTSIDE_CONTRACT.has(path) ? { status: 405, allow: 'GET' } : undefined;
}

/** The methods a client may send to a path of the API: those a path does not declare are a 405 there. */
export const CLIENT_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

export interface ContractPath {
  /** The path template, e.g. `/pets/{petId}`. */
  template: string;
  /** A URL of it, every path parameter `1`, e.g. `/v1/pets/1`. */
  url: string;
  /** The `Allow` of its 405: the methods it declares, sorted. */
  allow: string;
  /** The CLIENT_METHODS it does not declare. */
  undeclared: string[];
  /** One of them that may carry a body (not GET or HEAD). */
  otherMethod: string;
}

/** Each path of the contract, with what a 405 on it says: so that tests of 405s follow the contract. */
export const contractPaths: ContractPath[] = Object.keys(contract.dereferenced.paths ?? {}).map((template) => {
  const declared = contract.operations.filter(({ path }) => path === template).map(({ method }) => method);
  const undeclared = CLIENT_METHODS.filter((method) => !declared.includes(method));
  // PROPFIND, which OpenAPI cannot declare, when the path declares every other method.
  const otherMethod = undeclared.find((method) => method !== 'GET' && method !== 'HEAD') ?? 'PROPFIND';
  return {
    template,
    url: `${contract.basePath}${template.replace(/\{[^}]+\}/g, '1')}`,
    allow: [...declared].sort().join(', '),
    undeclared,
    otherMethod,
  };
});

/** The contract's path for a template, failing the test when the contract has no such path. */
export function contractPath(template: string): ContractPath {
  const found = contractPaths.find((path) => path.template === template);
  if (found === undefined) throw new Error(`the contract has no path ${template}`);
  return found;
}

/** How an answer outside the contract departs from `expected` and from the error body every failure has. */
function outsideViolations(
  method: string,
  url: string,
  response: ObservedResponse,
  expected: { status: number; allow?: string },
): string[] {
  const where = `${method} ${url} -> ${response.statusCode}`;
  const problems: string[] = [];
  if (response.statusCode !== expected.status) problems.push(`${where}: expected ${expected.status}`);
  if (response.headers.allow !== expected.allow) {
    problems.push(`${where}: Allow is ${String(response.headers.allow)}, expected ${String(expected.allow)}`);
  }
  if (method === 'HEAD') return response.body === '' ? problems : [...problems, `${where}: a HEAD response has a body`];
  let body: unknown;
  try {
    body = JSON.parse(response.body);
  } catch {
    body = undefined;
  }
  const version = versionOf(url);
  const mediaType = String(response.headers['content-type']).split(';', 1)[0]?.trim().toLowerCase();
  const ofItsType = mediaType === version.errorMediaType;
  if (!ofItsType || !version.isErrorBody(body) || (body as { status: unknown }).status !== response.statusCode) {
    problems.push(
      `${where}: not an error body (${version.errorMediaType}) with its status: ${response.body.slice(0, 200)}`,
    );
  }
  return problems;
}

/** A failure's Error code, when its body is JSON with one. */
function errorCodeOf(response: ObservedResponse): string | undefined {
  if (response.statusCode < 400) return undefined;
  try {
    const { code } = JSON.parse(response.body) as { code?: unknown };
    if (code === undefined) return undefined;
    return typeof code === 'string' ? code : JSON.stringify(code);
  } catch {
    return undefined;
  }
}

/** A failure's Error body whose code the contract's `ErrorCode` does not list. */
function unlistedErrorCode(method: string, url: string, response: ObservedResponse): string[] {
  const code = errorCodeOf(response);
  return code === undefined || versionOf(url).errorCodes.has(code)
    ? []
    : [`${method} ${url} -> ${response.statusCode}: code ${code} is not one of ErrorCode's`];
}

/** Every way a response departs from the contract of the version that answered it; empty when it conforms. */
export function contractViolations(method: string, url: string, response: ObservedResponse): string[] {
  const expected = outsideTheContract(method, url);
  const departures =
    expected === undefined
      ? versionOf(url).conformance.violations(method, url, response)
      : outsideViolations(method, url, response, expected);
  return [...departures, ...unlistedErrorCode(method, url, response)];
}

export class ContractViolation extends Error {}

const responseLog = process.env.PETSTORE_RESPONSE_LOG;
const logged = new Set<string>();

/**
 * Opt-in (PETSTORE_RESPONSE_LOG=file), for `npm run contract:check`: appends `/v1 GET /pets/{petId}
 * 404 not_found` once (the base path of the version that answered, and the Error code on a
 * failure), which it holds to that version's contract and the operation's `x-error-codes`.
 */
function logResponse(method: string, url: string, response: ObservedResponse): void {
  const version = versionOf(url);
  const { template } = version.conformance.findOperation(method, url);
  if (responseLog === undefined || template === undefined) return;
  const code = errorCodeOf(response);
  const seen = `${method.toUpperCase()} ${template} ${response.statusCode}${code === undefined ? '' : ` ${code}`}`;
  const line = `${version.contract.basePath} ${seen}\n`;
  if (!logged.has(line)) appendFileSync(responseLog, line);
  logged.add(line);
}

/** Throws (failing the test) unless the response conforms to the contract of the version that answered it. */
export function assertConforms(method: string, url: string, response: ObservedResponse): void {
  const problems = contractViolations(method, url, response);
  if (problems.length > 0) throw new ContractViolation(problems.join('\n'));
  logResponse(method, url, response);
}

export { contract };
