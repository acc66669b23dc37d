import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/contract/paths.js';
import { servedVersions } from './contract.js';

// A team adds an operation to openapi.yaml: the newest version.
const { contract } = servedVersions;

/** Where the example operation goes: a path the contract has, so that its method is a 405 until then. */
const PATH = '/pets/{petId}';

/**
 * The operations the tests of the contract-first loop may add, in order of preference: they take the
 * first the contract lacks, so they keep an operation to add once a team has added the real one.
 */
const CANDIDATES = [
  { method: 'DELETE', operationId: 'deletePet', summary: 'Remove an animal' },
  { method: 'PUT', operationId: 'replacePet', summary: 'Replace an animal' },
  { method: 'POST', operationId: 'retirePet', summary: 'Retire an animal' },
];

const candidate = CANDIDATES.find(
  ({ method, operationId }) =>
    !contract.operations.some((operation) => operation.operationId === operationId) &&
    !contract.operations.some((operation) => operation.path === PATH && operation.method === method),
);
if (candidate === undefined)
  throw new Error(`test/helpers/new-operation.ts: the contract has every candidate on ${PATH}`);

/**
 * An operation the contract does not have yet, on `/pets/{petId}` (deletePet while the contract
 * lacks it): its 204 has no body, its 404 one example, `notFound`, and it declares the responses
 * every operation does (SHARED_RESPONSES).
 */
export const NEW_OPERATION = {
  ...candidate,
  path: PATH,
  /** The URL of pet `id`. */
  url: (id: number | string) => `${contract.basePath}/pets/${id}`,
};

/**
 * The responses every operation declares, as the server may give them to any request (the scope,
 * a body it does not take, the rate limit, a failure, a transfer coding, the database away):
 * test/every-operation.test.ts and test/scopes.test.ts get each one from every operation.
 */
export const SHARED_RESPONSES = ['403', '405', '415', '429', '500', '501', '503'] as const;
const SHARED_RESPONSE_NAMES: Record<(typeof SHARED_RESPONSES)[number], string> = {
  '403': 'Forbidden',
  '405': 'MethodNotAllowed',
  '415': 'UnsupportedMediaType',
  '429': 'RateLimited',
  '500': 'InternalError',
  '501': 'NotImplemented',
  '503': 'ServiceUnavailable',
};

/** The 404 example the operation gives (a problem detail, as every v2 error is). */
export const NEW_OPERATION_NOT_FOUND = {
  type: 'https://petstore.example/problems/not_found',
  title: 'Not found',
  status: 404,
  detail: 'No pet with this id',
  code: 'not_found',
};

/** The operation as a team would add it to openapi.yaml, under its path. */
export const NEW_OPERATION_YAML = `    ${candidate.method.toLowerCase()}:
      operationId: ${candidate.operationId}
      summary: ${candidate.summary}
      description: Acts on the animal in the catalogue.
      tags: [pets]
      security:
        - apiKey: ['pets:write']
      parameters:
        - $ref: '#/components/parameters/PetId'
      x-error-codes:
        '400': [invalid_request]
        '401': [unauthorized]
        '403': [insufficient_scope]
        '404': [not_found]
        '405': [method_not_allowed]
        '415': [unsupported_media_type]
        '429': [rate_limited]
        '500': [internal_error]
        '501': [not_implemented]
        '503': [service_unavailable]
      responses:
        '204':
          description: Done.
          headers:
            X-Request-Id:
              $ref: '#/components/headers/XRequestId'
        '400':
          $ref: '#/components/responses/BadRequest'
        '401':
          $ref: '#/components/responses/Unauthorized'
        '404':
          description: No animal has this id.
          content:
            application/problem+json:
              schema:
                $ref: '#/components/schemas/Problem'
              examples:
                notFound:
                  value:
                    type: https://petstore.example/problems/not_found
                    title: Not found
                    status: 404
                    detail: No pet with this id
                    code: not_found
${SHARED_RESPONSES.map((status) => `        '${status}':\n          $ref: '#/components/responses/${SHARED_RESPONSE_NAMES[status]}'\n`).join('')}`;

/**
 * openapi.yaml's text with the new operation added and, as docs/contract.md asks of an addition to
 * a released version, `info.version` moved to the next minor version (an unreleased one stays).
 */
export function withNewOperation(contractText: string): string {
  return contractText
    .replace(`  ${PATH}:\n`, `  ${PATH}:\n${NEW_OPERATION_YAML}`)
    .replace(
      /^( {2}version: )((\d+)\.(\d+)\.\d+)$/m,
      (line, key: string, version: string, major: string, minor: string) =>
        // A version not released yet already carries its changes (contracts/ has no file of it).
        existsSync(join(projectRoot, 'contracts', `v${version}.yaml`)) ? `${key}${major}.${Number(minor) + 1}.0` : line,
    );
}
