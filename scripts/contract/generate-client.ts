/**
 * What `npm run generate` writes to the TypeScript client (clients/typescript/src/generated/),
 * computed in-process: the contract's types (the very text of generated/openapi.ts), and what the
 * client's runtime needs to know of each operation, event and status, as data. The client has no
 * code of its own per operation: an operation added to the contract is callable once this runs.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { OpenAPIV3_1 } from 'openapi-types';
import { validateContract } from '../../src/contract/document.js';
import { generateTypes } from './generate-types.js';

export const clientGeneratedDir = 'clients/typescript/src/generated';
const TYPES_FILE = `${clientGeneratedDir}/openapi.ts`;
const CONTRACT_FILE = `${clientGeneratedDir}/contract.ts`;

/** Methods RFC 9110 defines as idempotent: sending one twice has the effect of sending it once. */
const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
/** The header whose value makes a repeated create answer with the first one (docs/api.md). */
const IDEMPOTENCY_KEY = 'idempotency-key';
/** The query parameter a `Link: rel="next"` URL adds to fetch the next page (docs/api.md). */
const CURSOR = 'cursor';
/** Names the client object itself takes: an operationId may not shadow them. */
const RESERVED = new Set(['each', 'page', 'modify']);

type Operation = OpenAPIV3_1.OperationObject<{ 'x-error-codes'?: Record<string, string[]> }>;
type Parameter = OpenAPIV3_1.ParameterObject;

interface OperationEntry {
  method: string;
  path: string;
  requestMediaType?: string;
  /** Each query parameter that is an array, and whether it is exploded (`id=1&id=2`) or not (`id=1,2`). */
  arrays?: Record<string, { explode: boolean }>;
  /** Safe to send again when no answer came: idempotent by its method, or a create taking an Idempotency-Key. */
  safeToResend: boolean;
  /** It takes an `Idempotency-Key`: the client makes one per call, reused by its retries. */
  idempotencyKey?: true;
  /** Its success is a JSON array: a list whose items `each` yields, page after page. */
  list?: true;
  /** The query parameter holding the position of the next page, for a list that pages. */
  cursor?: string;
}

function entryOf(method: string, path: string, operation: Operation, pathParameters: Parameter[]): OperationEntry {
  const parameters = [...pathParameters, ...((operation.parameters ?? []) as Parameter[])];
  const arrays = Object.fromEntries(
    parameters
      .filter(
        (parameter) =>
          parameter.in === 'query' && (parameter.schema as { type?: unknown } | undefined)?.type === 'array',
      )
      .map((parameter) => [parameter.name, { explode: parameter.explode ?? (parameter.style ?? 'form') === 'form' }]),
  );
  const idempotencyKey = parameters.some(
    (parameter) => parameter.in === 'header' && parameter.name.toLowerCase() === IDEMPOTENCY_KEY,
  );
  const success = Object.entries(operation.responses ?? {}).find(([status]) => status.startsWith('2'))?.[1] as
    OpenAPIV3_1.ResponseObject | undefined;
  const list = (success?.content?.['application/json']?.schema as { type?: unknown } | undefined)?.type === 'array';
  const cursor = parameters.find((parameter) => parameter.in === 'query' && parameter.name === CURSOR);
  const requestMediaType = Object.keys(
    (operation.requestBody as OpenAPIV3_1.RequestBodyObject | undefined)?.content ?? {},
  )[0];
  return {
    method,
    path,
    ...(requestMediaType === undefined ? {} : { requestMediaType }),
    ...(Object.keys(arrays).length === 0 ? {} : { arrays }),
    safeToResend: IDEMPOTENT_METHODS.has(method) || idempotencyKey,
    ...(idempotencyKey ? { idempotencyKey: true as const } : {}),
    ...(list ? { list: true as const } : {}),
    ...(list && cursor !== undefined ? { cursor: cursor.name } : {}),
  };
}

interface Described {
  operations: Record<string, OperationEntry>;
  /** Per operation, per status, the codes its Error bodies may carry (`x-error-codes`), when it says. */
  errorCodes: Record<string, Record<string, string[]> | undefined>;
  /** Per event type, the schema of its payload. */
  events: Record<string, unknown>;
  /** Per schema with `x-transitions`, the moves each of its values may make. */
  transitions: Record<string, Record<string, string[]>>;
}

function describe(document: OpenAPIV3_1.Document): Described {
  const described: Described = { operations: {}, errorCodes: {}, events: {}, transitions: {} };
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const method of HTTP_METHODS) {
      const operation = item?.[method] as Operation | undefined;
      if (operation?.operationId === undefined) continue;
      if (RESERVED.has(operation.operationId)) {
        throw new Error(`operationId ${operation.operationId} is a name the client keeps for itself`);
      }
      const upper = method.toUpperCase();
      described.operations[operation.operationId] = entryOf(
        upper,
        path,
        operation,
        (item?.parameters ?? []) as Parameter[],
      );
      described.errorCodes[operation.operationId] = operation['x-error-codes'];
    }
  }
  for (const [type, item] of Object.entries(document.webhooks ?? {})) {
    const body = (item as OpenAPIV3_1.PathItemObject).post?.requestBody as OpenAPIV3_1.RequestBodyObject | undefined;
    described.events[type] = body?.content['application/json']?.schema;
  }
  for (const [name, schema] of Object.entries(document.components?.schemas ?? {})) {
    const moves = (schema as { 'x-transitions'?: Record<string, string[]> })['x-transitions'];
    if (moves !== undefined) described.transitions[name] = moves;
  }
  const states = Object.values(described.transitions).flatMap((moves) => Object.keys(moves));
  if (new Set(states).size !== states.length) {
    throw new Error('two x-transitions share a status: canMove(from, to) could not tell them apart');
  }
  return described;
}

const literal = (value: unknown) => JSON.stringify(value, null, 2);

/** The per-operation error codes as a type: a union per status, `{}` where the contract does not say. */
function errorCodesType(errorCodes: Described['errorCodes']): string {
  const lines = Object.entries(errorCodes).map(([operationId, byStatus]) => {
    const statuses = Object.entries(byStatus ?? {}).map(
      ([status, codes]) => `${status}: ${codes.map((code) => `'${code}'`).join(' | ')}`,
    );
    return `  ${operationId}: {${statuses.length === 0 ? '' : ` ${statuses.join('; ')} `}};`;
  });
  return `export interface ErrorCodes {\n${lines.join('\n')}\n}`;
}

function contractModule(described: Described): string {
  return [
    '// Generated by `npm run generate` from openapi.yaml (scripts/contract/generate-client.ts); do not edit.',
    '',
    '/** Each operation: its method and path, and what the client must know to send it and send it again. */',
    `export const operations = ${literal(described.operations)} as const;`,
    '',
    '/** Per operation, per status, the codes of its Error bodies (`x-error-codes`); `{}` where the contract does not list them. */',
    errorCodesType(described.errorCodes),
    '',
    '/** Per event type, the JSON Schema of its payload. */',
    `export const eventSchemas: Record<string, object> = ${literal(described.events)};`,
    '',
    "/** Per status schema, the statuses each status may move to (the contract's `x-transitions`). */",
    `export const transitions = ${literal(described.transitions)} as const;`,
    '',
  ].join('\n');
}

/**
 * Every file the client's generated/ holds, by path from the project root, with its text: from the
 * contract's generated types and the contract dereferenced.
 */
export function clientFiles(types: string, dereferenced: OpenAPIV3_1.Document): Map<string, string> {
  return new Map([
    [TYPES_FILE, types],
    [CONTRACT_FILE, contractModule(describe(dereferenced))],
  ]);
}

/** Every file the client's generated/ holds, generated from the project's openapi.yaml. */
export async function generateClient(root: string): Promise<Map<string, string>> {
  const [types, { dereferenced }] = await Promise.all([
    generateTypes(root),
    validateContract(join(root, 'openapi.yaml')),
  ]);
  return clientFiles(types, dereferenced);
}

/** The client's generated files that are not what the contract (`dereferenced`) generates. */
export async function staleClientFiles(root: string, dereferenced: OpenAPIV3_1.Document): Promise<string[]> {
  const expected = clientFiles(await generateTypes(root), dereferenced);
  const committed = (file: string) => {
    try {
      return readFileSync(join(root, file), 'utf8');
    } catch {
      return undefined;
    }
  };
  return [...expected].filter(([file, text]) => committed(file) !== text).map(([file]) => file);
}
