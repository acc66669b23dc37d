import SwaggerParser from '@apidevtools/swagger-parser';
import type { OpenAPIV3_1 } from 'openapi-types';
import { contractPath } from './paths.js';

export type OpenApiDocument = OpenAPIV3_1.Document;

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

export interface ContractOperation {
  operationId: string;
  method: string;
  /** The OpenAPI path template, e.g. `/pets/{petId}`. */
  path: string;
  /** Security schemes that accept a request (empty: no authentication). */
  securitySchemes: string[];
  deprecated: boolean;
}

export interface Contract {
  /** The contract as written (refs intact): what the server publishes. */
  document: OpenApiDocument;
  /** Validated and dereferenced: what routes and validation are built from. */
  dereferenced: OpenApiDocument;
  /** The path every server URL shares, e.g. `/v1`. */
  basePath: string;
  operations: ContractOperation[];
}

/** Loads `openapi.yaml`, validates it with swagger-parser and dereferences it. */
export async function loadContract(path: string = contractPath): Promise<Contract> {
  const document = (await SwaggerParser.parse(path)) as OpenApiDocument;
  // validate() dereferences in place, so give it a copy and keep the written form.
  const dereferenced = (await SwaggerParser.validate(structuredClone(document))) as OpenApiDocument;
  return {
    document,
    dereferenced,
    basePath: basePathOf(dereferenced),
    operations: operationsOf(dereferenced),
  };
}

function basePathOf(document: OpenApiDocument): string {
  const paths = new Set(
    (document.servers ?? []).map(({ url }) => url.replace(/^[a-z]+:\/\/[^/]+/i, '').replace(/\/$/, '')),
  );
  const [basePath, ...others] = [...paths];
  if (basePath === undefined || others.length > 0) {
    throw new Error(`Every server URL in the contract must share one path; found ${[...paths].join(', ')}`);
  }
  return basePath;
}

function operationsOf(document: OpenApiDocument): ContractOperation[] {
  const operations: ContractOperation[] = [];
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const method of HTTP_METHODS) {
      const operation = item?.[method];
      if (operation === undefined) continue;
      if (operation.operationId === undefined) throw new Error(`${method} ${path} has no operationId`);
      const security = operation.security ?? document.security ?? [];
      operations.push({
        operationId: operation.operationId,
        method: method.toUpperCase(),
        path,
        securitySchemes: security.flatMap((requirement) => Object.keys(requirement)),
        deprecated: operation.deprecated === true,
      });
    }
  }
  return operations;
}
