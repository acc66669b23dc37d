/**
 * What both clients' generators read from the contract: each operation as a client sends it and
 * sends it again, its documentation, its error codes; each event's schema; each status machine.
 * Nothing here names an operation: a contract with other operations describes those.
 */
import type { OpenAPIV3_1 } from 'openapi-types';

/** Methods RFC 9110 defines as idempotent: sending one twice has the effect of sending it once. */
const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
/** The header whose value makes a repeated create answer with the first one (docs/api.md). */
const IDEMPOTENCY_KEY = 'idempotency-key';
/** The query parameter a `Link: rel="next"` URL adds to fetch the next page (docs/api.md). */
const CURSOR = 'cursor';
/** The code a client reports for one this version of the contract does not list. */
export const UNKNOWN_CODE = 'unknown';

type Operation = OpenAPIV3_1.OperationObject<{
  'x-error-codes'?: Record<string, string[]>;
  'x-deprecated-at'?: string;
  'x-sunset'?: string;
  'x-successor'?: string;
  'x-stability-level'?: string;
}>;
type Parameter = OpenAPIV3_1.ParameterObject;

/** What a client must know to send an operation and send it again. */
export interface OperationEntry {
  method: string;
  path: string;
  requestMediaType?: string;
  /** Each query parameter that is an array, and whether it is exploded (`id=1&id=2`) or not (`id=1,2`). */
  arrays?: Record<string, { explode: boolean }>;
  /** Safe to send again when no answer came: idempotent by its method, or a create taking an Idempotency-Key. */
  safeToResend: boolean;
  /** It takes an `Idempotency-Key`: the client makes one per call, reused by its retries. */
  idempotencyKey?: true;
  /** A list that pages (its success is an array and it takes a cursor): the query parameter holding the next page's position. */
  cursor?: string;
  /** Its success always carries an `ETag` (`always`), or only sometimes (`sometimes`); absent when never. */
  etag?: 'always' | 'sometimes';
  /** When it was deprecated, when it goes (`Sunset`) and what replaces it, from its `x-` fields. */
  deprecated?: { since?: string; sunset?: string; successor?: string };
}

/** An operation's parameter, as a generator writes it into a signature. */
export interface ParameterDescription {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  description?: string;
  /** Its schema as written (refs intact). */
  schema: unknown;
}

export interface OperationDescription {
  operationId: string;
  entry: OperationEntry;
  summary?: string;
  description?: string;
  /** The scopes its key needs. */
  scopes: string[];
  /** `x-stability-level`, when not stable. */
  stability?: string;
  parameters: ParameterDescription[];
  /** The request body's schema as written (refs intact), when it takes one. */
  requestSchema?: unknown;
  requestRequired: boolean;
  /** The success's JSON schema as written (refs intact), undefined when it has no body. */
  responseSchema?: unknown;
  /** The success's status. */
  successStatus: number;
  /** The codes its Error bodies may carry, over every status (`x-error-codes`), in the contract's order. */
  errorCodes: string[];
  /** Per status, those codes. */
  errorCodesByStatus: Record<string, string[]>;
}

export interface ClientDescription {
  operations: OperationDescription[];
  /** Per event type (its `webhooks` key), the schema of its payload: dereferenced, and as written. */
  events: { type: string; summary?: string; schema: unknown; written: unknown }[];
  /** Per schema with `x-transitions`, the moves each of its values may make. */
  transitions: Record<string, Record<string, string[]>>;
  /** The contract's component schemas as written. */
  schemas: Record<string, unknown>;
}

/** The object a local `$ref` (`#/components/...`) names, followed until it is not a `$ref`. */
export function resolved<T>(document: OpenAPIV3_1.Document, value: T): T {
  let current: unknown = value;
  for (let hops = 0; hops < 32; hops++) {
    const ref = (current as { $ref?: unknown } | undefined)?.$ref;
    if (typeof ref !== 'string') return current as T;
    if (!ref.startsWith('#/')) throw new Error(`${ref}: only local references are supported`);
    current = ref
      .slice(2)
      .split('/')
      .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
      .reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], document);
  }
  throw new Error('a $ref cycle');
}

function entryOf(
  method: string,
  path: string,
  operation: Operation,
  parameters: Parameter[],
  success: OpenAPIV3_1.ResponseObject | undefined,
  document: OpenAPIV3_1.Document,
): OperationEntry {
  const arrays = Object.fromEntries(
    parameters
      .filter(
        (parameter) =>
          parameter.in === 'query' &&
          resolved(document, parameter.schema as { type?: unknown } | undefined)?.type === 'array',
      )
      .map((parameter) => [parameter.name, { explode: parameter.explode ?? (parameter.style ?? 'form') === 'form' }]),
  );
  const idempotencyKey = parameters.some(
    (parameter) => parameter.in === 'header' && parameter.name.toLowerCase() === IDEMPOTENCY_KEY,
  );
  const body = resolved(
    document,
    success?.content?.['application/json']?.schema as { type?: unknown; properties?: object } | undefined,
  );
  // A page is an array (v1), or an envelope whose `nextCursor` names the next page (v2).
  const paged = body?.type === 'array' || (body?.properties !== undefined && 'nextCursor' in body.properties);
  const cursor = parameters.find((parameter) => parameter.in === 'query' && parameter.name === CURSOR);
  const requestMediaType = Object.keys(
    resolved(document, operation.requestBody as OpenAPIV3_1.RequestBodyObject | undefined)?.content ?? {},
  )[0];
  const etagHeader = Object.entries(success?.headers ?? {}).find(([name]) => name.toLowerCase() === 'etag')?.[1];
  const etag = resolved(document, etagHeader as OpenAPIV3_1.HeaderObject | undefined);
  const deprecated = {
    ...(operation['x-deprecated-at'] === undefined ? {} : { since: operation['x-deprecated-at'] }),
    ...(operation['x-sunset'] === undefined ? {} : { sunset: operation['x-sunset'] }),
    ...(operation['x-successor'] === undefined ? {} : { successor: operation['x-successor'] }),
  };
  return {
    method,
    path,
    ...(requestMediaType === undefined ? {} : { requestMediaType }),
    ...(Object.keys(arrays).length === 0 ? {} : { arrays }),
    safeToResend: IDEMPOTENT_METHODS.has(method) || idempotencyKey,
    ...(idempotencyKey ? { idempotencyKey: true as const } : {}),
    // A list without a cursor is one page: it is not offered to the pagers.
    ...(paged && cursor !== undefined ? { cursor: cursor.name } : {}),
    ...(etag === undefined ? {} : { etag: etag.required === true ? ('always' as const) : ('sometimes' as const) }),
    ...(operation.deprecated === true ? { deprecated } : {}),
  };
}

function describeOperation(
  document: OpenAPIV3_1.Document,
  method: string,
  path: string,
  operation: Operation,
  pathParameters: unknown[],
): OperationDescription {
  const byName = new Map<string, Parameter>();
  for (const parameter of [...pathParameters, ...(operation.parameters ?? [])]) {
    const found = resolved(document, parameter as Parameter);
    byName.set(`${found.in}:${found.name}`, found);
  }
  const parameters = [...byName.values()].filter((parameter) => parameter.in !== 'cookie');
  const [status, response] = Object.entries(operation.responses ?? {}).find(([code]) => code.startsWith('2')) ?? [];
  const success = resolved(document, response as OpenAPIV3_1.ResponseObject | undefined);
  const requestBody = resolved(document, operation.requestBody as OpenAPIV3_1.RequestBodyObject | undefined);
  const errorCodesByStatus = operation['x-error-codes'] ?? {};
  const errorCodes = [...new Set(Object.values(errorCodesByStatus).flat())];
  if (errorCodes.includes(UNKNOWN_CODE)) {
    throw new Error(`${operation.operationId}: '${UNKNOWN_CODE}' is the code the clients report for an unlisted one`);
  }
  const security = operation.security ?? document.security ?? [];
  return {
    operationId: operation.operationId ?? '',
    entry: entryOf(method.toUpperCase(), path, operation, parameters, success, document),
    ...(operation.summary === undefined ? {} : { summary: operation.summary }),
    ...(operation.description === undefined ? {} : { description: operation.description.trim() }),
    scopes: [...new Set(security.flatMap((requirement) => Object.values(requirement).flat()))],
    ...(operation['x-stability-level'] === undefined ? {} : { stability: operation['x-stability-level'] }),
    parameters: parameters.map((parameter) => ({
      name: parameter.name,
      in: parameter.in as ParameterDescription['in'],
      required: parameter.required === true,
      ...(parameter.description === undefined ? {} : { description: parameter.description.trim() }),
      schema: parameter.schema,
    })),
    ...(requestBody === undefined ? {} : { requestSchema: Object.values(requestBody.content)[0]?.schema }),
    requestRequired: requestBody?.required === true,
    ...(success?.content?.['application/json'] === undefined
      ? {}
      : { responseSchema: success.content['application/json'].schema }),
    successStatus: Number(status ?? 200),
    errorCodes,
    errorCodesByStatus,
  };
}

/** The contract, as written (`document`, refs intact) and dereferenced. */
export interface ClientContract {
  document: OpenAPIV3_1.Document;
  dereferenced: OpenAPIV3_1.Document;
}

/** The contract as the clients see it. `reserved`: names a client keeps for itself, no operationId may take. */
export function describeClient(
  { document, dereferenced }: ClientContract,
  reserved: ReadonlySet<string>,
): ClientDescription {
  const operations: OperationDescription[] = [];
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const method of HTTP_METHODS) {
      const operation = item?.[method] as Operation | undefined;
      if (operation?.operationId === undefined) continue;
      if (reserved.has(operation.operationId)) {
        throw new Error(`operationId ${operation.operationId} is a name the client keeps for itself`);
      }
      operations.push(describeOperation(document, method, path, operation, item?.parameters ?? []));
    }
  }
  const events = Object.entries(document.webhooks ?? {}).map(([type, written]) => {
    const post = resolved(document, written as OpenAPIV3_1.PathItemObject).post;
    const body = resolved(document, post?.requestBody as OpenAPIV3_1.RequestBodyObject | undefined);
    const writtenSchema = body?.content['application/json']?.schema;
    const item = (dereferenced.webhooks?.[type] ?? {}) as OpenAPIV3_1.PathItemObject;
    const schema = (item.post?.requestBody as OpenAPIV3_1.RequestBodyObject | undefined)?.content['application/json']
      ?.schema;
    return { type, ...(post?.summary === undefined ? {} : { summary: post.summary }), schema, written: writtenSchema };
  });
  const schemas = (document.components?.schemas ?? {}) as Record<string, unknown>;
  const transitions: Record<string, Record<string, string[]>> = {};
  for (const [name, schema] of Object.entries(schemas)) {
    const moves = (schema as { 'x-transitions'?: Record<string, string[]> })['x-transitions'];
    if (moves !== undefined) transitions[name] = moves;
  }
  const states = Object.values(transitions).flatMap((moves) => Object.keys(moves));
  if (new Set(states).size !== states.length) {
    throw new Error('two x-transitions share a status: canMove(from, to) could not tell them apart');
  }
  return { operations, events, transitions, schemas };
}
