/**
 * Whether a response is one the contract allows: its status declared for the operation, its body
 * matching the schema, its documented headers present and valid. The tests check every response
 * they see with it (test/helpers/contract.ts), and `npm run dev` every response it sends
 * (src/dev/response-check.ts).
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { OpenAPIV3_1 } from 'openapi-types';
import type { Contract } from './document.js';
import { PROBLEM_MEDIA_TYPE } from './media-types.js';

export interface ObservedResponse {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

type ResponseObject = OpenAPIV3_1.ResponseObject;
type HeaderObject = OpenAPIV3_1.HeaderObject;

export interface OperationMatch {
  pathKnown: boolean;
  operation?: OpenAPIV3_1.OperationObject | undefined;
  template?: string;
}

function header(response: ObservedResponse, name: string): string | undefined {
  const value = response.headers[name.toLowerCase()];
  return value === undefined ? undefined : String(value);
}

/** A header is text; an integer header must be a decimal integer to be checked as one. */
function headerValue(value: string, schema: object): unknown {
  const type = (schema as { type?: unknown }).type;
  return type === 'integer' && /^-?(0|[1-9][0-9]*)$/.test(value) ? Number(value) : value;
}

/** `body/name must match pattern … (schema …/properties/name/pattern)`: what failed, and where. */
function describe(errors: ErrorObject[] | null | undefined, schemaAt: string): string {
  return (errors ?? [])
    .map(
      ({ instancePath, message, schemaPath }) => `body${instancePath} ${message} (${schemaAt}${schemaPath.slice(1)})`,
    )
    .join('; ');
}

export class ResponseConformance {
  // The contract's schemas were checked against the meta-schema when it was validated (validateContract):
  // checking again would compile the meta-schema in every process that checks a response.
  readonly #ajv = addFormats.default(new Ajv2020({ strict: false, allErrors: true, validateSchema: false }));
  readonly #validators = new WeakMap<object, ValidateFunction>();
  /** The body of a 404 or 405 no operation answers: a `Problem` where the contract has one (v2), else its `Error`. */
  readonly #errorBody: { mediaType: string; schema: object; at: string };
  readonly #paths: { template: string; pattern: RegExp; item: OpenAPIV3_1.PathItemObject }[];

  constructor(readonly contract: Contract) {
    const schemas = contract.dereferenced.components?.schemas ?? {};
    this.#errorBody =
      schemas.Problem === undefined
        ? { mediaType: 'application/json', schema: schemas.Error as object, at: '#/components/schemas/Error' }
        : { mediaType: PROBLEM_MEDIA_TYPE, schema: schemas.Problem, at: '#/components/schemas/Problem' };
    this.#paths = Object.entries(contract.dereferenced.paths ?? {}).map(([template, item]) => ({
      template,
      // As the server routes (PathTable): a path parameter matches one segment, not an empty one.
      pattern: new RegExp(`^${contract.basePath}${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
      item: item as OpenAPIV3_1.PathItemObject,
    }));
  }

  #validatorFor(schema: object): ValidateFunction {
    let validate = this.#validators.get(schema);
    if (validate === undefined) {
      validate = this.#ajv.compile(schema);
      this.#validators.set(schema, validate);
    }
    return validate;
  }

  /** The contract's operation for a method and URL, if any. */
  findOperation(method: string, url: string): OperationMatch {
    const path = url.split('?', 1)[0] ?? '';
    const match = this.#paths.find(({ pattern }) => pattern.test(path));
    if (match === undefined) return { pathKnown: false, operation: undefined };
    const operation = match.item[method.toLowerCase() as `${OpenAPIV3_1.HttpMethods}`];
    return { pathKnown: true, operation, template: match.template };
  }

  #checkJsonBody(
    response: ObservedResponse,
    { mediaType, schema, at: schemaAt }: { mediaType: string; schema: object; at: string },
    where: string,
  ): string[] {
    if (where.startsWith('HEAD ')) return response.body === '' ? [] : [`${where}: a HEAD response has a body`];
    const contentType = header(response, 'content-type') ?? '';
    const essence = (contentType.split(';', 1)[0] ?? '').trim().toLowerCase();
    if (essence !== mediaType) {
      return [`${where}: content-type is "${contentType}", the contract says ${mediaType}`];
    }
    let body: unknown;
    try {
      body = JSON.parse(response.body);
    } catch {
      return [`${where}: body is not JSON: ${response.body.slice(0, 200)}`];
    }
    const validate = this.#validatorFor(schema);
    if (validate(body)) return [];
    return [
      `${where}: body ${response.body.slice(0, 300)} does not match the schema: ${describe(validate.errors, schemaAt)}`,
    ];
  }

  #checkErrorStatus(response: ObservedResponse, where: string): string[] {
    try {
      const body = JSON.parse(response.body) as { status?: unknown };
      return body.status === response.statusCode
        ? []
        : [`${where}: Error.status ${String(body.status)} is not the HTTP status`];
    } catch {
      return [];
    }
  }

  /** Every way a response departs from the contract; empty when it conforms. */
  violations(method: string, url: string, response: ObservedResponse): string[] {
    const where = `${method} ${url} -> ${response.statusCode}`;
    const { pathKnown, operation, template } = this.findOperation(method, url);
    if (operation === undefined) {
      // Not an operation: an unknown path is a 404 and a known path with another method a 405,
      // both with the error body (the contract's 405 response documents Allow).
      const expected = pathKnown ? 405 : 404;
      const problems = response.statusCode === expected ? [] : [`${where}: expected ${expected}`];
      if (expected === 405 && header(response, 'allow') === undefined) problems.push(`${where}: 405 without Allow`);
      return [
        ...problems,
        ...this.#checkJsonBody(response, this.#errorBody, where),
        ...this.#checkErrorStatus(response, where),
      ];
    }
    const status = String(response.statusCode);
    const declared = operation.responses?.[status] as ResponseObject | undefined;
    if (declared === undefined) {
      return [
        `${where}: status ${status} is not declared for ${operation.operationId}: ${response.body.slice(0, 200)}`,
      ];
    }
    const at = `#/paths/${(template ?? '').replaceAll('~', '~0').replaceAll('/', '~1')}/${method.toLowerCase()}/responses/${status}`;
    const problems: string[] = [];
    for (const [name, definition] of Object.entries(declared.headers ?? {}) as [string, HeaderObject][]) {
      const value = header(response, name);
      if (value === undefined) {
        if (definition.required === true)
          problems.push(`${where}: required header ${name} is missing (${at}/headers/${name})`);
        continue;
      }
      const schema = definition.schema;
      if (schema !== undefined && !this.#validatorFor(schema)(headerValue(value, schema))) {
        problems.push(`${where}: header ${name}: "${value}" does not match its schema (${at}/headers/${name}/schema)`);
      }
    }
    // Each response comes in one media type: JSON, or a problem detail (an error's).
    const [mediaType, media] = Object.entries(declared.content ?? {})[0] ?? [];
    if (mediaType !== undefined && media?.schema !== undefined) {
      const schemaAt = `${at}/content/${mediaType.replaceAll('/', '~1')}/schema`;
      problems.push(...this.#checkJsonBody(response, { mediaType, schema: media.schema, at: schemaAt }, where));
    } else if (response.body !== '') problems.push(`${where}: the contract declares no body (${at})`);
    if (response.statusCode >= 400) problems.push(...this.#checkErrorStatus(response, where));
    return problems;
  }
}
