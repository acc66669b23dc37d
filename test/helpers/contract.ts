import { appendFileSync } from 'node:fs';
import { loadContract, type Contract } from '../../src/contract.js';
import { type ObservedResponse, ResponseConformance } from '../../src/response-conformance.js';

export type { ObservedResponse };

const contract: Contract = await loadContract();
const conformance = new ResponseConformance(contract);

/** The contract's operation for a method and URL, if any. */
export const findOperation = (method: string, url: string) => conformance.findOperation(method, url);

/** Every way a response departs from openapi.yaml; empty when it conforms. */
export const contractViolations = (method: string, url: string, response: ObservedResponse) =>
  conformance.violations(method, url, response);

export class ContractViolation extends Error {}

const responseLog = process.env.PETSTORE_RESPONSE_LOG;
const logged = new Set<string>();

/** Opt-in (PETSTORE_RESPONSE_LOG=file), for `npm run contract:check`: appends `GET /pets/{petId} 404` once. */
function logResponse(method: string, url: string, statusCode: number): void {
  const { template } = findOperation(method, url);
  if (responseLog === undefined || template === undefined) return;
  const line = `${method.toUpperCase()} ${template} ${statusCode}\n`;
  if (!logged.has(line)) appendFileSync(responseLog, line);
  logged.add(line);
}

/** Throws (failing the test) unless the response conforms to openapi.yaml. */
export function assertConforms(method: string, url: string, response: ObservedResponse): void {
  const problems = contractViolations(method, url, response);
  if (problems.length > 0) throw new ContractViolation(problems.join('\n'));
  logResponse(method, url, response.statusCode);
}

export { contract };
