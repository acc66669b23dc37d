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
/** The query parameter that names the page to fetch: from a `Link: rel="next"` URL, or an envelope's next cursor. */
const CURSOR = 'cursor';
/** The media type of an error answered as problem details (RFC 9457): its text is `detail`, not `message`. */
const PROBLEM_JSON = 'application/problem+json';
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
  /**
   * A list that pages (its success is a list and it takes a cursor): the query parameter holding the
   * next page's position. Without `envelope`, the success is an array and the next page is its
   * `Link: rel="next"` URL's.
   */
  cursor?: string;
  /** The success is an envelope: the property holding the page's items, and the one holding the next cursor (null on the last). */
  envelope?: { items: string; next: string };
  /** Its errors are problem details (`application/problem+json`): the text is `detail`, with `type` and `title`. */
  problem?: true;
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
  /** The client sends it itself when the call does not (an `Idempotency-Key`, one per call): never required of a caller. */
  suppliedByClient?: true;
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
  /** For a list that pages, the schema of one of its items as written (refs intact). */
  itemSchema?: unknown;
  /** The success's status. */
  successStatus: number;
  /** The codes its Error bodies may carry, over every status (`x-error-codes`), in the contract's order. */
  errorCodes: string[];
  /** Per status, those codes. */
  errorCodesByStatus: Record<string, string[]>;
}

export interface ClientDescription {
  /** The contract's `info.version` (`2.0.0`). */
  version: string;
  operations: OperationDescription[];
  /** Per event type (its `webhooks` key), the schema of its payload: dereferenced, and as written. */
  events: { type: string; summary?: string; schema: unknown; written: unknown }[];
  /** Per schema with `x-transitions`, the moves each of its values may make. */
  transitions: Record<string, Record<string, string[]>>;
  /** The contract's component schemas as written. */
  schemas: Record<string, unknown>;
}

/** The folder of a version's generated files in each client: `v2` for a contract whose version is 2.x.y. */
export function versionFolder(version: string): string {
  const major = /^(\d+)\./.exec(version)?.[1];
  if (major === undefined) throw new Error(`${version} is not a version the clients can name a folder after`);
  return `v${major}`;
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

interface Schema {
  type?: unknown;
  properties?: Record<string, unknown>;
  required?: string[];
  items?: unknown;
}

const typesOf = (schema: Schema | undefined) =>
  Array.isArray(schema?.type) ? (schema.type as unknown[]) : schema?.type === undefined ? [] : [schema.type];

/**
 * Whether a success body is a page envelope, and its two properties: an object holding exactly one
 * required array (the items) and one string-or-null property beside it (the next page's cursor,
 * null on the last). Told by its shape, so that no list's or property's name is written here.
 */
function envelopeOf(document: OpenAPIV3_1.Document, body: Schema): { items: string; next: string } | undefined {
  if (!typesOf(body).includes('object') || body.properties === undefined) return undefined;
  const properties = Object.entries(body.properties).map(
    ([name, schema]) => [name, resolved(document, schema as Schema)] as const,
  );
  const arrays = properties.filter(
    ([name, schema]) => typesOf(schema).includes('array') && body.required?.includes(name),
  );
  const cursors = properties.filter(([, schema]) => {
    const types = typesOf(schema);
    return types.includes('string') && types.every((type) => type === 'string' || type === 'null');
  });
  const [items] = arrays;
  const [next] = cursors;
  if (arrays.length !== 1 || cursors.length !== 1 || items === undefined || next === undefined) return undefined;
  return { items: items[0], next: next[0] };
}

/** The schema, as written (refs intact), of one item of a list's success: its array's, or its envelope's. */
function itemSchemaOf(document: OpenAPIV3_1.Document, written: unknown, entry: OperationEntry): unknown {
  const body = resolved(document, written as Schema | undefined);
  if (entry.envelope !== undefined) {
    return resolved(document, body?.properties?.[entry.envelope.items] as Schema | undefined)?.items;
  }
  return body?.items;
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
  const body = resolved(document, success?.content?.['application/json']?.schema as Schema | undefined);
  const cursor = parameters.find((parameter) => parameter.in === 'query' && parameter.name === CURSOR);
  const envelope = body === undefined ? undefined : envelopeOf(document, body);
  const problem = Object.entries(operation.responses ?? {}).some(
    ([status, response]) =>
      !status.startsWith('2') &&
      resolved(document, response as OpenAPIV3_1.ResponseObject).content?.[PROBLEM_JSON] !== undefined,
  );
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
    ...((body?.type === 'array' || envelope !== undefined) && cursor !== undefined ? { cursor: cursor.name } : {}),
    ...(envelope !== undefined && cursor !== undefined ? { envelope } : {}),
    ...(problem ? { problem: true as const } : {}),
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
  const entry = entryOf(method.toUpperCase(), path, operation, parameters, success, document);
  const responseSchema = success?.content?.['application/json']?.schema;
  return {
    operationId: operation.operationId ?? '',
    entry,
    ...(operation.summary === undefined ? {} : { summary: operation.summary }),
    ...(operation.description === undefined ? {} : { description: operation.description.trim() }),
    scopes: [...new Set(security.flatMap((requirement) => Object.values(requirement).flat()))],
    ...(operation['x-stability-level'] === undefined ? {} : { stability: operation['x-stability-level'] }),
    parameters: parameters.map((parameter) => ({
      name: parameter.name,
      in: parameter.in as ParameterDescription['in'],
      required: parameter.required === true,
      ...(parameter.in === 'header' && parameter.name.toLowerCase() === IDEMPOTENCY_KEY
        ? { suppliedByClient: true as const }
        : {}),
      ...(parameter.description === undefined ? {} : { description: parameter.description.trim() }),
      schema: parameter.schema,
    })),
    ...(requestBody === undefined ? {} : { requestSchema: Object.values(requestBody.content)[0]?.schema }),
    requestRequired: requestBody?.required === true,
    ...(responseSchema === undefined ? {} : { responseSchema }),
    ...(entry.cursor === undefined ? {} : { itemSchema: itemSchemaOf(document, responseSchema, entry) }),
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
  return { version: document.info.version, operations, events, transitions, schemas };
}
