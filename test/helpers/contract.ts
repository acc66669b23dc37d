import { appendFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { OpenAPIV3_1 } from 'openapi-types';
import { loadContract, type Contract } from '../../src/contract.js';

export interface ObservedResponse {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

type ResponseObject = OpenAPIV3_1.ResponseObject;
type HeaderObject = OpenAPIV3_1.HeaderObject;

const contract: Contract = await loadContract();
const ajv = addFormats.default(new Ajv2020({ strict: false, allErrors: true }));
const validators = new WeakMap<object, ValidateFunction>();

function validatorFor(schema: object): ValidateFunction {
  let validate = validators.get(schema);
  if (validate === undefined) {
    validate = ajv.compile(schema);
    validators.set(schema, validate);
  }
  return validate;
}

const errorSchema = contract.dereferenced.components?.schemas?.Error as object;

/** As fastify routes: a path parameter matches one segment, possibly empty. */
function templateToRegExp(path: string): RegExp {
  return new RegExp(`^${contract.basePath}${path.replace(/\{[^}]+\}/g, '[^/]*')}$`);
}

const pathMatchers = Object.entries(contract.dereferenced.paths ?? {}).map(([template, item]) => ({
  template,
  pattern: templateToRegExp(template),
  item: item as OpenAPIV3_1.PathItemObject,
}));

/** The contract's operation for a method and URL, if any. */
export function findOperation(method: string, url: string) {
  const path = url.split('?', 1)[0] ?? '';
  const match = pathMatchers.find(({ pattern }) => pattern.test(path));
  if (match === undefined) return { pathKnown: false, operation: undefined };
  const operation = match.item[method.toLowerCase() as `${OpenAPIV3_1.HttpMethods}`];
  return { pathKnown: true, operation, template: match.template };
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

function checkJsonBody(response: ObservedResponse, schema: object, where: string): string[] {
  if (where.startsWith('HEAD ')) return response.body === '' ? [] : [`${where}: a HEAD response has a body`];
  const contentType = header(response, 'content-type') ?? '';
  if (!/^application\/json(;|$)/.test(contentType)) {
    return [`${where}: content-type is "${contentType}", the contract says application/json`];
  }
  let body: unknown;
  try {
    body = JSON.parse(response.body);
  } catch {
    return [`${where}: body is not JSON: ${response.body.slice(0, 200)}`];
  }
  const validate = validatorFor(schema);
  if (validate(body)) return [];
  return [
    `${where}: body ${response.body.slice(0, 300)} does not match the schema: ${ajv.errorsText(validate.errors)}`,
  ];
}

function checkErrorStatus(response: ObservedResponse, where: string): string[] {
  try {
    const body = JSON.parse(response.body) as { status?: unknown };
    return body.status === response.statusCode
      ? []
      : [`${where}: Error.status ${String(body.status)} is not the HTTP status`];
  } catch {
    return [];
  }
}

/** Every way a response departs from openapi.yaml; empty when it conforms. */
export function contractViolations(method: string, url: string, response: ObservedResponse): string[] {
  const where = `${method} ${url} -> ${response.statusCode}`;
  const { pathKnown, operation } = findOperation(method, url);
  if (operation === undefined) {
    // Not an operation: an unknown path is a 404 and a known path with another method a 405,
    // both with the Error body (the contract's 405 response documents Allow).
    const expected = pathKnown ? 405 : 404;
    const problems = response.statusCode === expected ? [] : [`${where}: expected ${expected}`];
    if (expected === 405 && header(response, 'allow') === undefined) problems.push(`${where}: 405 without Allow`);
    return [...problems, ...checkJsonBody(response, errorSchema, where), ...checkErrorStatus(response, where)];
  }
  const declared = operation.responses[String(response.statusCode)] as ResponseObject | undefined;
  if (declared === undefined) {
    return [
      `${where}: status ${response.statusCode} is not declared for ${operation.operationId}: ${response.body.slice(0, 200)}`,
    ];
  }
  const problems: string[] = [];
  for (const [name, definition] of Object.entries(declared.headers ?? {}) as [string, HeaderObject][]) {
    const value = header(response, name);
    if (value === undefined) {
      if (definition.required === true) problems.push(`${where}: required header ${name} is missing`);
      continue;
    }
    if (definition.schema !== undefined && !validatorFor(definition.schema)(headerValue(value, definition.schema))) {
      problems.push(`${where}: header ${name}: "${value}" does not match its schema`);
    }
  }
  const media = declared.content?.['application/json'];
  if (media?.schema !== undefined) problems.push(...checkJsonBody(response, media.schema, where));
  else if (response.body !== '') problems.push(`${where}: the contract declares no body`);
  if (response.statusCode >= 400) problems.push(...checkErrorStatus(response, where));
  return problems;
}

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
