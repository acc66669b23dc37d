import type { FastifySchema, RouteOptions } from 'fastify';
import type { FastifyRouteSchemaDef, FastifyValidationResult } from 'fastify/types/schema.js';
import { Ajv2020, type ErrorObject, type Options, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { shown } from '../domain/errors.js';
import { CompiledOnce } from './compile-once.js';

const shared: Options = {
  // allErrors lets a hostile body cost time proportional to its size; the first error is enough.
  allErrors: false,
  useDefaults: true,
  strict: true,
  // Checking each schema against the JSON Schema meta-schema means compiling that meta-schema, per
  // instance, on every start (a large share of a cold start). The build checks the contract's schemas
  // once instead (validateContract in src/contract/document.ts); strict mode still rejects what ajv cannot compile.
  validateSchema: false,
  // The contract's own extensions that sit in schemas: annotations, nothing to validate.
  keywords: ['x-transitions'],
};

/** JSON bodies are taken as sent: no coercion, nothing removed (unknown fields fail the schema). */
const bodyAjv = addFormats.default(new Ajv2020({ ...shared, coerceTypes: false, removeAdditional: false }));
/** Query and path values arrive as strings: integers are coerced after the canonical check below. */
const parameterAjv = addFormats.default(new Ajv2020({ ...shared, coerceTypes: true, removeAdditional: false }));

/** A canonical decimal integer: no sign but `-`, no leading zeros, no exponent, no fraction. */
const CANONICAL_INTEGER = /^-?(0|[1-9][0-9]*)$/;

interface IntegerSchema {
  type?: unknown;
  minimum?: number;
  maximum?: number;
}

interface ParameterSchema extends IntegerSchema {
  items?: IntegerSchema;
}

interface ObjectSchema {
  properties?: Record<string, ParameterSchema>;
}

/** Past 2^53 a decimal string no longer names one number (and 1e309 digits coerce to Infinity). */
function isCanonicalSafeInteger(value: unknown): boolean {
  return typeof value === 'string' && CANONICAL_INTEGER.test(value) && Number.isSafeInteger(Number(value));
}

/** Each integer parameter, with the error for a value that is not one: it states the range. */
function integerFields(schema: FastifySchema): [string, ErrorObject][] {
  const properties = (schema as ObjectSchema).properties ?? {};
  return Object.entries(properties)
    .filter(([, property]) => property.type === 'integer')
    .map(([name, property]) => [name, nonCanonical(name, property)]);
}

/**
 * Each array parameter: the contract's arrays are `style: form, explode: false`, one parameter
 * holding comma-separated values (`id=3,7,12`), with the error for an item that is not an integer.
 */
function arrayFields(schema: FastifySchema): [string, ErrorObject | undefined][] {
  const properties = (schema as ObjectSchema).properties ?? {};
  return Object.entries(properties)
    .filter(([, property]) => property.type === 'array')
    .map(([name, { items }]) => {
      if (items?.type !== 'integer') return [name, undefined];
      const { message = '' } = nonCanonical(name, items);
      return [
        name,
        typeError(name, `must be a comma-separated list of integers, each ${message.replace(/^must be an /, '')}`),
      ];
    });
}

/** A parameter's type error, in Ajv's shape, with a message of ours. */
function typeError(field: string, message: string): ErrorObject {
  return {
    keyword: 'type',
    instancePath: `/${field}`,
    schemaPath: `#/properties/${field}/type`,
    params: {},
    message,
  };
}

function nonCanonical(field: string, { minimum, maximum }: IntegerSchema): ErrorObject {
  const range = `${minimum ?? '-(2^53 - 1)'} to ${maximum ?? '2^53 - 1'}`;
  return typeError(field, `must be an integer from ${range} in plain decimal digits`);
}

/**
 * A client's parameter name as a message shows it: quoted, so that an empty name or white space
 * shows, and with invisible format characters (a right-to-left override) escaped.
 */
function quotedName(name: string): string {
  return JSON.stringify(shown(name)).replace(
    /[\p{Cf}\p{Zl}\p{Zp}]/gu,
    (character) => `\\u${(character.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`,
  );
}

/** A query parameter the operation does not declare: the message says which ones it does. */
function undeclared(name: string, declared: string[]): ErrorObject {
  const takes = declared.length === 0 ? 'no query parameters' : declared.join(', ');
  return {
    // Not Ajv's `additionalProperties`, which plugins/errors.ts words for body fields: this message is ours.
    keyword: 'undeclaredParameter',
    instancePath: `/${quotedName(name)}`,
    schemaPath: '#/additionalProperties',
    params: { additionalProperty: name },
    message: `is not a parameter of this operation; it takes ${takes}`,
  };
}

/** A repeated parameter (`?limit=5&limit=6`) arrives as an array: no schema here takes one. */
function givenTwice(field: string): ErrorObject {
  return typeError(field, 'must be given once');
}

/**
 * Ajv's coercion accepts `1e2`, `+3` and ` 7` as integers, and a repeated parameter arrives as an
 * array; the contract's integers are canonical decimal strings only, so check before coercing.
 */
function compileParameters(schema: FastifySchema): FastifyValidationResult {
  const validateSchema = parameterAjv.compile(schema);
  const integers = integerFields(schema);
  const arrays = arrayFields(schema);
  const arrayNames = new Set(arrays.map(([field]) => field));
  const declared = Object.keys((schema as ObjectSchema).properties ?? {});
  const validate = (data: Record<string, unknown> | null): boolean => {
    for (const [field, notIntegers] of arrays) {
      const value = data?.[field];
      if (Array.isArray(value)) {
        validate.errors = [givenTwice(field)];
        return false;
      }
      if (typeof value !== 'string' || data === null) continue;
      const items = value.split(',');
      if (notIntegers !== undefined && !items.every(isCanonicalSafeInteger)) {
        validate.errors = [{ ...notIntegers }];
        return false;
      }
      data[field] = items;
    }
    for (const [field, notAnInteger] of integers) {
      const value = data?.[field];
      if (value !== undefined && !isCanonicalSafeInteger(value)) {
        validate.errors = [Array.isArray(value) ? givenTwice(field) : { ...notAnInteger }];
        return false;
      }
    }
    // Ajv's validator is a type guard; its narrowing of `data` would hide that data may be null.
    const given: Record<string, unknown> | null = data;
    if (validateSchema(data)) {
      validate.errors = null;
      return true;
    }
    const errors = validateSchema.errors ?? [];
    const [first] = errors;
    if (first?.keyword === 'additionalProperties') {
      validate.errors = [undeclared(String(first.params.additionalProperty), declared)];
      return false;
    }
    const field = first?.instancePath.slice(1) ?? '';
    // An array parameter holds its list by now (a repeated one was refused above): its error is the schema's.
    const repeated = Array.isArray(given?.[field]) && !arrayNames.has(field);
    validate.errors = repeated ? [givenTwice(field)] : errors;
    return false;
  };
  validate.errors = null as ErrorObject[] | null;
  return validate as FastifyValidationResult;
}

/**
 * Node lower-cases header names; the contract spells them as documented (`Idempotency-Key`).
 * fastify lower-cases header schemas only for its own compiler, so do it here.
 */
function lowerCaseHeaderNames(schema: FastifySchema): FastifySchema {
  const { properties = {}, required = [] } = schema as ObjectSchema & { required?: string[] };
  return {
    ...schema,
    properties: Object.fromEntries(
      Object.entries(properties).map(([name, property]) => [name.toLowerCase(), property]),
    ),
    required: required.map((name) => name.toLowerCase()),
  } as FastifySchema;
}

/**
 * A query string holds the parameters the operation declares and no others: a misspelt or
 * unsupported one (`satus=sold`, `status[]=sold`) is a 400, not ignored, as an unknown body field is.
 */
function onlyDeclared(schema: FastifySchema): FastifySchema {
  return { ...schema, additionalProperties: false } as FastifySchema;
}

/**
 * An onRoute hook for the contract's routes. The glue gives an operation that declares no query
 * parameter no querystring schema, and fastify then validates nothing of its query string; with an
 * empty one, any query parameter sent to it is refused (onlyDeclared).
 */
export function validateEveryQueryString(route: RouteOptions): void {
  const schema = (route.schema ??= {});
  schema.querystring ??= { type: 'object', properties: {} };
}

/** A validator of JSON values by the rules bodies are held to (also for account names: src/auth/development-account.ts). */
export function compileBodySchema(schema: object): ValidateFunction {
  return bodyAjv.compile(schema);
}

function compileFresh({ schema, httpPart }: FastifyRouteSchemaDef<FastifySchema>): FastifyValidationResult {
  if (httpPart === 'body') return compileBodySchema(schema) as FastifyValidationResult;
  if (httpPart === 'querystring') return compileParameters(onlyDeclared(schema));
  return compileParameters(httpPart === 'headers' ? lowerCaseHeaderNames(schema) : schema);
}

/** Each validator compiled once per schema in a process (compile-once.ts); its `errors` are read at once, so sharing is safe. */
const validators = new CompiledOnce<FastifyValidationResult>();

export function compileValidator(definition: FastifyRouteSchemaDef<FastifySchema>): FastifyValidationResult {
  return validators.get(definition.httpPart ?? '', definition.schema, () => compileFresh(definition));
}

/**
 * The Error fastify makes of a failed validation (its `schemaErrorFormatter`): fastify's own
 * message, without the stack trace its default formatter captures, which was a tenth of a 400's
 * CPU (BENCHMARKS.md). The 400's words come from the error's `validation` (validation-messages.ts).
 */
export function validationFailure(errors: ErrorObject[], dataVar: string): Error {
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  const error = new Error(errors.map((error) => `${dataVar}${error.instancePath} ${error.message ?? ''}`).join(', '));
  Error.stackTraceLimit = stackTraceLimit;
  return error;
}
