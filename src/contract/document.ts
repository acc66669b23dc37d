import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { basename, extname, join } from 'node:path';
import type { OpenAPIV3_1 } from 'openapi-types';
import { compiledContractDir, contractPath } from './paths.js';

export type OpenApiDocument = OpenAPIV3_1.Document;

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

export interface ContractOperation {
  operationId: string;
  method: string;
  /** The OpenAPI path template, e.g. `/pets/{petId}`. */
  path: string;
  /** Security schemes that accept a request (empty: no authentication). */
  securitySchemes: string[];
  /** The scopes (OpenAPI 3.1 roles) its security requirement names: a key must hold them all. */
  scopes: string[];
  deprecated: boolean;
  /** A deprecated operation's dates and successor, from its `x-deprecated-at`, `x-sunset` and `x-successor`. */
  deprecation: Deprecation | undefined;
  /** `x-stability-level` (`beta`, `experimental`); stable when absent. */
  stability: string;
  /** The media type of its request body (one per operation), when it takes one. */
  requestMediaType: string | undefined;
  /**
   * `x-error-codes`: for each error status it declares, the `ErrorCode`s its Error body may carry
   * (`{'409': ['invalid_transition', 'pet_on_order']}`); undefined when absent or not such a map.
   */
  errorCodes: ErrorCodes | undefined;
}

/** An operation's `x-error-codes`: status (`'404'`) to the codes an answer with it may carry. */
export type ErrorCodes = Readonly<Record<string, readonly string[]>>;

export interface Deprecation {
  /** When it was deprecated (`x-deprecated-at`, a date). */
  deprecatedAt: Date;
  /** When it will be removed (`x-sunset`, a date, as oasdiff reads it). */
  sunset: Date;
  /** The operationId of the operation that replaces it (`x-successor`). */
  successor: string;
}

export interface ValidatedContract {
  /** The contract as written (refs intact): what the server publishes. */
  document: OpenApiDocument;
  /** Validated and dereferenced: what routes and validation are built from. */
  dereferenced: OpenApiDocument;
}

export interface Contract extends ValidatedContract {
  /** The path every server URL shares, e.g. `/v1`. */
  basePath: string;
  operations: ContractOperation[];
  /** SHA-256 (hex) of the contract file's bytes. */
  sha256: string;
  /** `build`: the copy `npm run build` validated, for these very bytes; `start`: validated now. */
  validatedAt: 'build' | 'start';
  /** The scope a key needs to subscribe to each event kind (its `x-scope`). */
  eventScopes: ReadonlyMap<string, string>;
}

/** The copy of the contract that `npm run build` validated and dereferenced. */
export interface CompiledContract extends ValidatedContract {
  /** SHA-256 (hex) of the contract file it was made from: it stands for those bytes only. */
  sourceSha256: string;
}

/**
 * Where `npm run build` keeps the validated copy of a contract file, by its name: openapi.yaml's is
 * openapi.json, a served release's (contracts/v1.2.0.yaml) v1.2.0.json.
 */
export const compiledContractFileFor = (path: string) =>
  join(compiledContractDir, `${basename(path, extname(path))}.json`);

export const compiledContractFile = compiledContractFileFor(contractPath);

export function sha256(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Every JSON Schema the document holds, named by where it is (`paths./pets.post.requestBody...`). */
function* schemasOf(value: unknown, at: string): Generator<[string, object]> {
  if (typeof value !== 'object' || value === null) return;
  for (const [key, child] of Object.entries(value)) {
    const where = `${at}.${key}`;
    if (key === 'schema' && typeof child === 'object' && child !== null) yield [where, child];
    else if (at === 'components.schemas') yield [where, child as object];
    else if (key !== 'examples' && key !== 'example') yield* schemasOf(child, where);
  }
}

/**
 * Validates the contract with swagger-parser and dereferences it, then checks each of its schemas
 * against the JSON Schema meta-schema, which the server's own compilers skip (plugins/validation.ts).
 */
export async function validateContract(path: string = contractPath): Promise<ValidatedContract> {
  // Loaded only when needed: most starts use the copy the build validated.
  const [{ default: SwaggerParser }, { Ajv2020 }] = await Promise.all([
    import('@apidevtools/swagger-parser'),
    import('ajv/dist/2020.js'),
  ]);
  const document = (await SwaggerParser.parse(path)) as OpenApiDocument;
  // validate() dereferences in place, so give it a copy and keep the written form.
  const dereferenced = (await SwaggerParser.validate(structuredClone(document))) as OpenApiDocument;
  const ajv = new Ajv2020({ strict: false });
  const schemas = [...schemasOf(dereferenced.paths, 'paths'), ...schemasOf(dereferenced.components, 'components')];
  const invalid = schemas.flatMap(([where, schema]) =>
    ajv.validateSchema(schema) ? [] : [`${where} ${ajv.errorsText(ajv.errors, { dataVar: 'schema' })}`],
  );
  if (invalid.length > 0) throw new Error(`invalid JSON Schema: ${invalid.join('; ')}`);
  return { document, dereferenced };
}

async function readCompiled(path: string, sourceSha256: string): Promise<CompiledContract | undefined> {
  const compiled = await readFile(compiledContractFileFor(path), 'utf8').then(
    (text) => JSON.parse(text) as CompiledContract,
    () => undefined,
  );
  return compiled?.sourceSha256 === sourceSha256 ? compiled : undefined;
}

/**
 * Loads a contract (by default `openapi.yaml`) validated and dereferenced. Validating costs a few
 * hundred milliseconds, so `npm run build` does it once for every contract served (openapi.yaml and
 * each older version's release) and keeps the result keyed by the file's hash; a contract whose
 * bytes differ from what was built (edited since, or another file) is validated here instead.
 */
export async function loadContract(path: string = contractPath): Promise<Contract> {
  const hash = sha256(await readFile(path));
  const compiled = await readCompiled(path, hash);
  const { document, dereferenced } = compiled ?? (await validateContract(path));
  return {
    document,
    dereferenced,
    basePath: basePathOf(dereferenced),
    operations: operationsOf(dereferenced),
    sha256: hash,
    validatedAt: compiled === undefined ? 'start' : 'build',
    eventScopes: eventScopesOf(dereferenced),
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

type OperationObject = OpenAPIV3_1.OperationObject<{
  'x-deprecated-at'?: unknown;
  'x-sunset'?: unknown;
  'x-successor'?: unknown;
  'x-stability-level'?: unknown;
  'x-error-codes'?: unknown;
}>;

/** `x-error-codes` when it is a map of statuses to lists of codes; undefined otherwise. */
function errorCodesOf(operation: OperationObject): ErrorCodes | undefined {
  const declared = operation['x-error-codes'];
  if (typeof declared !== 'object' || declared === null || Array.isArray(declared)) return undefined;
  const entries = Object.entries(declared as Record<string, unknown>);
  const isCodeList = (codes: unknown): codes is string[] =>
    Array.isArray(codes) && codes.every((code) => typeof code === 'string');
  return entries.every(([, codes]) => isCodeList(codes)) ? (declared as ErrorCodes) : undefined;
}

function dateOf(value: unknown): Date | undefined {
  const date =
    typeof value === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(value) ? new Date(`${value}T00:00:00Z`) : undefined;
  return date === undefined || Number.isNaN(date.getTime()) ? undefined : date;
}

/** A deprecated operation's dates and successor, when its contract gives them all. */
function deprecationOf(operation: OperationObject, operationIds: Set<string>): Deprecation | undefined {
  const deprecatedAt = dateOf(operation['x-deprecated-at']);
  const sunset = dateOf(operation['x-sunset']);
  const successor = operation['x-successor'];
  if (operation.deprecated !== true || deprecatedAt === undefined || sunset === undefined) return undefined;
  if (typeof successor !== 'string' || !operationIds.has(successor)) return undefined;
  return { deprecatedAt, sunset, successor };
}

/**
 * The deprecated operations that do not say when they were deprecated, when they go and what
 * replaces them: every response of one says so (plugins/deprecation.ts), so neither the server
 * nor `contract:check` accepts one without them.
 */
export function incompleteDeprecations(operations: readonly ContractOperation[]): string[] {
  return operations
    .filter(({ deprecated, deprecation }) => deprecated && deprecation === undefined)
    .map(
      ({ operationId }) =>
        `${operationId} is deprecated: give it x-deprecated-at and x-sunset (dates, YYYY-MM-DD) and x-successor (the operationId that replaces it)`,
    );
}

function operationsOf(document: OpenApiDocument): ContractOperation[] {
  const operations: ContractOperation[] = [];
  const operationIds = new Set(
    Object.values(document.paths ?? {}).flatMap((item) =>
      HTTP_METHODS.flatMap((method) => item?.[method]?.operationId ?? []),
    ),
  );
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const method of HTTP_METHODS) {
      const operation = item?.[method] as OperationObject | undefined;
      if (operation === undefined) continue;
      if (operation.operationId === undefined) throw new Error(`${method} ${path} has no operationId`);
      const security = operation.security ?? document.security ?? [];
      operations.push({
        operationId: operation.operationId,
        method: method.toUpperCase(),
        path,
        securitySchemes: security.flatMap((requirement) => Object.keys(requirement)),
        scopes: security.flatMap((requirement) => Object.values(requirement).flat()),
        deprecated: operation.deprecated === true,
        deprecation: deprecationOf(operation, operationIds),
        stability: typeof operation['x-stability-level'] === 'string' ? operation['x-stability-level'] : 'stable',
        requestMediaType: Object.keys(
          (operation.requestBody as OpenAPIV3_1.RequestBodyObject | undefined)?.content ?? {},
        )[0],
        errorCodes: errorCodesOf(operation),
      });
    }
  }
  return operations;
}

/** The scopes a key can be given: the `x-scopes` of the contract's security scheme, with what each allows. */
export function scopesOf(document: OpenApiDocument): Map<string, string> {
  const schemes = Object.values(document.components?.securitySchemes ?? {}) as {
    'x-scopes'?: Record<string, string>;
  }[];
  return new Map(schemes.flatMap((scheme) => Object.entries(scheme['x-scopes'] ?? {})));
}

type EventKinds = [string, { post?: { 'x-scope'?: unknown } }][];

function eventKindsOf(document: OpenApiDocument): EventKinds {
  return Object.entries(document.webhooks ?? {}) as EventKinds;
}

/**
 * The scope a key needs to subscribe to each event kind the contract declares: its `x-scope`, the
 * scope that reads the data it carries. A kind without a valid one is left out: eventsWithoutScope.
 */
export function eventScopesOf(document: OpenApiDocument): Map<string, string> {
  const known = scopesOf(document);
  return new Map(
    eventKindsOf(document).flatMap(([kind, item]) => {
      const scope = item.post?.['x-scope'];
      return typeof scope === 'string' && known.has(scope) ? [[kind, scope]] : [];
    }),
  );
}

/**
 * The event kinds that name no scope a key can be given: neither the server nor `contract:check`
 * accepts one, since its subscribers would get data no scope guards.
 */
export function eventsWithoutScope(document: OpenApiDocument): string[] {
  const scoped = eventScopesOf(document);
  return eventKindsOf(document)
    .filter(([kind]) => !scoped.has(kind))
    .map(
      ([kind]) =>
        `event ${kind} names no scope that reads its data: give it x-scope, one of ${[...scopesOf(document).keys()].join(', ')}`,
    );
}
